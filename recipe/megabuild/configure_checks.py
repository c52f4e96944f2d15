"""What the split refuses once CMake has configured, before anything compiles.

The split step runs the front end's configure alone first (`frontend.configure_first`), so
these cost seconds instead of a full build:

- FindPython's record under the `Python` prefix (`require_python_record`): the pytorch steps
  retarget it, and a project that finds its interpreter as `Python3` has none;
- every switch the driver flips in the cache later (`FLIPPED_SWITCHES`: USE_MAGMA on CUDA
  variants) is in the cache with the value the driver set: the flip edits that entry, so a
  switch that reached CMake under another name (a scikit-build-core `cmake.define` entry such
  as `MY_MAGMA = {env = "USE_MAGMA"}`) or not at all would otherwise fail only after the build,
  and with a message that blames MAGMA.

After the flip's own configure the switch must still hold the flipped value: a project that
turns it back off (MAGMA not found) is refused before the linalg library is rebuilt.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from . import pyproject
from .cmake_cache import CMakeCache
from .errors import MegabuildError
from .python_target import require_python_record
from .scikit_build import same_setting

# switch -> the variant backends on which the split flips it in the cache
FLIPPED_SWITCHES = {"USE_MAGMA": ("cuda",)}


def flipped_switches(backend: str, env: Mapping[str, str]) -> dict[str, str]:
    """The switches the split will flip for this backend, with the value the driver set."""
    return {name: env.get(name, "") for name, backends in FLIPPED_SWITCHES.items()
            if backend in backends}


def check_configured(cache_path: Path, src_dir: Path, switches: Mapping[str, str]) -> None:
    """The refusals after the split's first configure (see the module doc)."""
    cache = CMakeCache.read(cache_path)
    require_python_record(cache)
    for name, wanted in switches.items():
        if name not in cache:
            raise MegabuildError(f"{cache.source}: {name} is not in the cache after CMake's "
                                 f"configure, so the split cannot flip it later (the driver set "
                                 f"{name}={wanted} in the environment); {_how_it_reaches(src_dir, name)}")
        if not same_setting(cache.get(name), wanted):
            raise MegabuildError(f"{cache.source}: {name} is {cache.get(name)} after CMake's "
                                 f"configure, though the driver set {name}={wanted}; the "
                                 f"configure must take it from the environment: "
                                 f"{_how_it_reaches(src_dir, name)}")


def check_flipped(cache_path: Path, name: str, value: str) -> None:
    """After the flip's configure: the switch kept the value the driver wrote."""
    cache = CMakeCache.read(cache_path)
    now = cache.get(name)
    if not same_setting(now, value):
        raise MegabuildError(f"{cache.source}: the configure after setting {name}={value} "
                             f"turned it back to {now}: the project switched it off (for "
                             f"USE_MAGMA: MAGMA was not found); make the dependency findable "
                             "(the variant's host requirements); the magma flavour was not built")


def _how_it_reaches(src_dir: Path, name: str) -> str:
    """Where the variable should reach CMake, naming the `cmake.define` entries that read it."""
    entries = pyproject.defines_reading(src_dir, name)
    wanted = f'{name} = {{env = "{name}"}}'
    if entries and wanted not in entries:
        return (f"pyproject.toml's [tool.scikit-build.cmake.define] reads it only as "
                f"{'; '.join(entries)}: define {wanted} there")
    if entries:
        return (f"pyproject.toml's [tool.scikit-build.cmake.define] has {wanted}, yet CMake "
                f"did not keep it: check what CMakeLists.txt does with {name}")
    if (Path(src_dir) / "setup.py").is_file():
        return (f"setup.py hands every USE_* variable to CMake as -D at the first configure; "
                f"remove the build folder if another configure wrote its cache")
    return f"add {wanted} to pyproject.toml's [tool.scikit-build.cmake.define]"
