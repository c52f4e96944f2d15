"""The build tools' versions, written once: the CMake range the recipe accepts and the releases
the feedstock's suite builds with.

- `CMAKE_FLOOR`: the oldest CMake PyTorch 2.14 accepts: 3.27, its `cmake_minimum_required`
  since pytorch#154783 (the reland of #153153, commit c2beeade, 2025) and `cmake>=3.27` in its
  pyproject.toml's build requirements; `CMAKE_CEILING`: the next major release, excluded.
  Both recipes pin `cmake` to `CMAKE_SPEC` (`feedstock lint` checks it), and every driver step
  that runs CMake refuses one outside the range before it writes anything (`check_cmake`).
- `TESTED_CMAKE`: the floor, 3.30 (the first that stores an empty ABIFLAGS as `<none>` in
  FindPython's record) and the newest release: the suite runs the megabuild on each, from
  PyPI's wheels, the same upstream binaries a conda build gets. `TESTED_NINJA` likewise.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from typing import Mapping

from .errors import MegabuildError

CMAKE_FLOOR = (3, 27)
CMAKE_CEILING = (5,)
CMAKE_SPEC = "cmake >=3.27,<5"
TESTED_CMAKE = ("3.27.9", "3.30.9", "4.4.5")
NEWEST_CMAKE = TESTED_CMAKE[-1]
TESTED_NINJA = "1.13.2"


def parse_release(text: str) -> tuple[int, ...]:
    """`cmake version 4.4.5` or `4.4.5-rc1` -> (4, 4, 5); () when no version is in the text."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(part) for part in match.groups() if part is not None) if match else ()


def in_range(release: tuple[int, ...]) -> bool:
    return CMAKE_FLOOR <= release < CMAKE_CEILING


def cmake_release(env: Mapping[str, str]) -> tuple[str, tuple[int, ...]]:
    """(path, release) of the `cmake` the step's PATH finds; a missing or silent one is an error."""
    path = shutil.which("cmake", path=env.get("PATH", ""))
    if path is None:
        raise MegabuildError(f"no cmake on the build environment's PATH; add `{CMAKE_SPEC}` to "
                             "the build requirements")
    return path, release_of(path, env)


def release_of(path: str, env: Mapping[str, str]) -> tuple[int, ...]:
    """The release `path --version` prints; a CMake that cannot say is an error."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                              env=dict(env))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MegabuildError(f"cannot run {path} --version: {exc}") from None
    release = parse_release(proc.stdout) if proc.returncode == 0 else ()
    if not release:
        raise MegabuildError(f"{path} --version printed no version (exit code {proc.returncode}); "
                             f"install a working `{CMAKE_SPEC}` into the build environment")
    return release


ON_PATH = "put a CMake in that range first on PATH (the recipe's build requirement does)"


def require_in_range(path: str, release: tuple[int, ...], fix: str = ON_PATH) -> str:
    """`path` when its release is in [CMAKE_FLOOR, CMAKE_CEILING); else one line ending in `fix`."""
    if not in_range(release):
        shown = ".".join(map(str, release))
        raise MegabuildError(f"{path} is CMake {shown}, outside the range this recipe builds "
                             f"with ({CMAKE_SPEC}); {fix}")
    return path


def check_cmake(env: Mapping[str, str]) -> str:
    """The CMake the step will run from PATH (setup.py's), refused outside [CMAKE_FLOOR,
    CMAKE_CEILING); returns its path. Called before a step writes anything."""
    return require_in_range(*cmake_release(env))
