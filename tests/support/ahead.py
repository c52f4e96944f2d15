"""Work a worker does before it waits on the toolchain channel (tests/conftest.py).

On a fresh machine one worker builds the toolchain channel (about 2.5 minutes) while the other
waits on its lock with a core idle. What each chain needs soon after and the channel does not
make is made first instead: the image bases (mmdebstrap) for the CPU chain, the repackaged
NVIDIA and nvcc packages and the 3.13t interpreter for the CUDA chain. Each goes into the
machine cache it is read from later, so nothing is made twice; on a warm machine each is a look
at that cache.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

from tests.support.paths import cache_root


def packaged_before(kind: str) -> bool:
    """Whether nvidia_wheels.cached_packages' cache of `kind` holds a complete entry: then the
    machine has made these packages before, and the fixture that needs them places them itself."""
    return any((cache_root() / kind).glob("*/complete"))


def image_bases(host_python: Path) -> list[Path]:
    """The runtime base and the build stage's base of the cpu images built for `host_python`
    (the functions `python -m feedstock image` calls, so the same cached tars; the gpu images'
    are the same two); none without mmdebstrap (the image tests then skip and say why)."""
    from feedstock.after_build.image.base import debian_base, runtime_packages
    from feedstock.after_build.image.build_stage import stage_base
    from feedstock.after_build.image.build_tools import toolset

    if shutil.which("mmdebstrap") is None:
        return []
    return [debian_base([host_python], runtime_packages("cpu")).path,
            stage_base([host_python], toolset("cpu", [])).path]


def _packaged_once(kind: str, make: Callable[[Path, Path], object], work: Path, name: str) -> bool:
    """make(channel, work) when the machine has no complete entry of `kind`; True when made here."""
    if packaged_before(kind):
        return False
    make(work / f"{name}-channel", work / f"{name}-work")
    shutil.rmtree(work / f"{name}-work", ignore_errors=True)
    return True


def nvidia_packages(work: Path) -> bool:
    """The NVIDIA runtime's packages (tests/support/nvidia_wheels.py) when the machine has none."""
    from tests.support.nvidia_wheels import nvidia_channel

    return _packaged_once("nvidia-conda", nvidia_channel, work, "nvidia")


def nvcc_package(work: Path) -> bool:
    """nvcc's package (tests/support/nvcc_package.py) when the machine has none."""
    from tests.support.nvcc_package import nvcc_channel

    return _packaged_once("nvcc-conda", nvcc_channel, work, "nvcc")


def free_threaded_python(work: Path) -> bool:
    """The 3.13t interpreter (tests/support/free_threaded_python.py: Debian's source, about three
    minutes of both cores) when the machine has none; True when built here."""
    from tests.support import free_threaded_python as ft

    if (ft.install_dir() / "complete").is_file():
        return False
    ft.free_threaded_python(work / "python313t-build")
    shutil.rmtree(work / "python313t-build", ignore_errors=True)
    return True
