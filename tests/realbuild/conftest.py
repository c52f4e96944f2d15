"""Session fixtures of the real-binary packages (tests/realbuild/real_packages.py): built once per
session, shared by the packages' own checks and by the dependents' tests."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def wheelbuild(realbuild_toolchain: dict, torch_wheel: Path, pytorch_cmakecache_dir: Path) -> dict:
    """pytorch-cpu 2.13.0 from the real CPU wheel, built by rattler-build and installed by rattler."""
    from tests.realbuild.real_packages import cpu_wheel_packages
    from tests.support.toolchain import ToolchainUnavailable

    try:
        return cpu_wheel_packages(realbuild_toolchain, torch_wheel, pytorch_cmakecache_dir)
    except ToolchainUnavailable as err:
        pytest.skip(str(err))


@pytest.fixture(scope="session")
def cudawheel(realbuild_toolchain: dict, cuda_torch_wheel: Path, pytorch_cmakecache_dir: Path) -> dict:
    """pytorch-gpu 2.14.1 (CUDA 13.0) from the real cu130 wheel, installed with __cuda=13.0."""
    from tests.realbuild.real_packages import WrongNvcc, cuda_wheel_packages
    from tests.support.toolchain import ToolchainUnavailable

    try:
        return cuda_wheel_packages(realbuild_toolchain, cuda_torch_wheel, pytorch_cmakecache_dir)
    except (ToolchainUnavailable, WrongNvcc) as err:
        pytest.skip(str(err))
