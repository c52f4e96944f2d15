"""The build tools a real build gets: PyPI's CMake and Ninja wheels (the upstream release binaries
that conda-forge packages too), never this machine's own cmake and ninja.

The versions come from the one place that names them, `recipe/megabuild/tool_versions.py`
(the recipe's CMake range and the releases the suite tests). Each wheel is downloaded and
unpacked once per machine into `cache_root()/build-tools/<name>-<version>/` (a complete entry
or none, so two workers or two runs never see half a tool); `tool_path()` puts the chosen
CMake and Ninja first on a PATH.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.paths import cache_root

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / "recipe") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "recipe"))

from megabuild.tool_versions import NEWEST_CMAKE, TESTED_CMAKE, TESTED_NINJA  # noqa: E402

__all__ = ["NEWEST_CMAKE", "TESTED_CMAKE", "TESTED_NINJA", "BuildToolsUnavailable", "cmake_bin",
           "ninja_bin", "tool_path", "wheel_file"]
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64")


class BuildToolsUnavailable(Exception):
    """PyPI's wheel of a build tool could not be had; tests skip with this reason."""


def wheel_file(name: str, version: str, dest: Path) -> Path:
    """`pip download` of PyPI's `name==version` binary wheel for this machine into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    proc = subprocess.run([sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps",
                           "--only-binary=:all:", *platforms, "-d", str(dest), "--quiet",
                           "--disable-pip-version-check"], capture_output=True, text=True, timeout=900)
    wheels = sorted(dest.glob(f"{name}-{version}-*.whl"))
    if proc.returncode != 0 or not wheels:
        reason = ((proc.stderr or proc.stdout).strip().splitlines() or ["no wheel"])[-1]
        raise BuildToolsUnavailable(f"PyPI's {name}=={version} wheel could not be downloaded: {reason}")
    return wheels[0]


def _unpack(wheel: Path, dest: Path) -> None:
    """Unzip keeping the mode bits (wheels keep them in external_attr; zipfile drops them)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            archive.extract(info, dest)
            mode = info.external_attr >> 16
            if mode and not info.is_dir():
                (dest / info.filename).chmod(mode & 0o7777)


def unpacked(name: str, version: str) -> Path:
    """The unpacked wheel of `name==version` in the machine's cache (made on first use)."""
    entry = cache_root() / "build-tools" / f"{name}-{version}"
    if (entry / "complete").is_file():
        return entry
    tmp = entry.with_name(f"{entry.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _unpack(wheel_file(name, version, tmp / "wheel"), tmp / "files")
        shutil.rmtree(tmp / "wheel")
        (tmp / "complete").write_text(f"{name}=={version}\n")
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(tmp, entry)
        except OSError:
            if not (entry / "complete").is_file():  # not another worker's complete entry: retry
                shutil.rmtree(entry, ignore_errors=True)
                os.replace(tmp, entry)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry


def cmake_bin(version: str = NEWEST_CMAKE) -> Path:
    """The folder holding PyPI's `cmake`, `ctest` and `cpack` of that release."""
    folder = unpacked("cmake", version) / "files" / "cmake" / "data" / "bin"
    if not (folder / "cmake").is_file():
        raise BuildToolsUnavailable(f"PyPI's cmake=={version} wheel has no cmake/data/bin/cmake")
    return folder


def ninja_bin(version: str = TESTED_NINJA) -> Path:
    """The folder holding PyPI's `ninja` binary of that release (the wheel's scripts folder)."""
    folder = unpacked("ninja", version) / "files" / f"ninja-{version}.data" / "scripts"
    if not (folder / "ninja").is_file():
        raise BuildToolsUnavailable(f"PyPI's ninja=={version} wheel has no scripts/ninja")
    return folder


def tool_path(cmake: str = NEWEST_CMAKE, path: str | None = None) -> str:
    """`path` (default: this process's PATH) with PyPI's CMake `cmake` and Ninja first."""
    rest = os.environ.get("PATH", "") if path is None else path
    return os.pathsep.join([str(cmake_bin(cmake)), str(ninja_bin()), *filter(None, [rest])])
