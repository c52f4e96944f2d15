"""A split step run again on a build folder that later steps used.

The pytorch steps leave the build folder's cache naming their own Python (the last one), and the
split's MAGMA flip leaves USE_MAGMA on. setup.py does not configure a folder that has a cache,
so a split run again would build for that other Python and save a pristine cache naming it, or
stage the magma library as nomagma. Before its configure the split puts the cache back to what
its own first configure wrote: retargeted to the split's Python, each flipped switch at the
driver's value. A fresh folder, or one the split left, is not touched.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from . import log
from .cmake_cache import CMakeCache
from .errors import MegabuildError
from .python_target import RECORD_ENTRIES, PythonTarget
from .retarget import retarget_cache, same_interpreter
from .scikit_build import same_setting


def restore_split_state(cache_path: Path, target: PythonTarget, switches: Mapping[str, str]) -> None:
    """Point an existing cache back at the split's Python and the switches' driver values."""
    if not cache_path.is_file():
        return
    cache = CMakeCache.read(cache_path)
    changes = []
    # without FindPython's record there is nothing to retarget; the checks after configure
    # refuse such a project
    if all(key in cache for key in RECORD_ENTRIES):
        old = PythonTarget.from_cmake_cache(cache)
        if not same_interpreter(old, target):
            changes += [c.describe() for c in retarget_cache(cache, target, old)]
    for name, value in switches.items():
        if name in cache and not same_setting(cache.get(name), value):
            changes.append(f"{name}: {cache.get(name)} -> {value} (the split starts without the flip)")
            cache.set(name, value)
    if changes:
        log.info(f"split: {cache_path} was left by later steps; back to the split's own settings:")
        for change in changes:
            log.info(f"  {change}")
        cache.write(cache_path)


def require_split_python(cache_path: Path, target: PythonTarget) -> None:
    """The cache about to be saved as pristine names the split's Python: the pytorch steps
    retarget from it and take whatever it names for the old interpreter."""
    cache = CMakeCache.read(cache_path)
    named = PythonTarget.from_cmake_cache(cache)
    executable = cache.get("Python_EXECUTABLE") if "Python_EXECUTABLE" in cache else named.executable
    if executable != target.executable or named.version != target.version or named.soabi != target.soabi:
        raise MegabuildError(f"{cache_path} names Python {named.version} at {executable} after the "
                             f"split's build, not the split's {target.version} at {target.executable}; "
                             f"the pristine cache was not saved: remove {cache_path.parent} and run "
                             "the libtorch-split step again")
