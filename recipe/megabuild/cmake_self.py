"""CMake's entries about itself (CMAKE_COMMAND, CTEST, CPACK, CMAKE_ROOT), when the CMake a
cache names is gone.

The pristine cache records the split's CMake. When that was PyPI's cmake in the split's own
Python environment, a later step whose environment was made again at the same prefix (as
conda-build does) finds that path gone, and Ninja, which reruns CMake through the path it was
generated with, stops with `.../site-packages/cmake/data/bin/cmake: not found`. Such entries
are answered by the CMake of this step, asked for its own values (`cmake -P`), never kept.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping

from .cmake_cache import CMakeCache
from .errors import MegabuildError
from .retarget import CMAKE_OWN_KEYS

_KEYS = sorted(CMAKE_OWN_KEYS)
_SCRIPT = "message(\"" + "|".join(f"${{{key}}}" for key in _KEYS) + "\")\n"


def own_entries(cmake: str, work_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The values `cmake` records about itself, from a script it runs in `work_dir`."""
    script = Path(work_dir) / f".megabuild-cmake-self-{os.getpid()}.cmake"
    script.write_text(_SCRIPT)
    try:
        proc = subprocess.run([cmake, "-P", str(script)], capture_output=True, text=True,
                              env=dict(env), timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MegabuildError(f"cannot run {cmake} -P: {exc}") from None
    finally:
        script.unlink(missing_ok=True)
    values = proc.stderr.strip().split("|")  # message() writes to stderr
    if proc.returncode != 0 or len(values) != len(_KEYS) or not all(values):
        raise MegabuildError(f"{cmake} -P did not report its own location (exit code "
                             f"{proc.returncode}); install a working CMake into the build environment")
    return dict(zip(_KEYS, values))


def replace_dead_cmake(cache: CMakeCache, cmake: str, work_dir: Path,
                       env: Mapping[str, str]) -> list[str]:
    """When the cache's CMAKE_COMMAND no longer exists, set CMake's own entries to `cmake`'s;
    returns a line per change (none when the recorded CMake is still there)."""
    recorded = cache.entry("CMAKE_COMMAND")
    if recorded is None or os.path.exists(recorded.value):
        return []
    changes = []
    for key, value in own_entries(cmake, work_dir, env).items():
        if key in cache and cache.get(key) != value:
            changes.append(f"{key}: {cache.get(key)} (gone) -> {value}")
            cache.set(key, value)
    return changes
