"""What the build stage adds per flavour (feedstock/after_build/image/build_tools.py), without a
container: the Debian packages, the CUDA conda specs pinned to the image's CUDA runtime, the
variables set and passed by name."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from feedstock.after_build.image.build_tools import DEV_PREFIX, toolset
from feedstock.errors import FeedstockError


def _record(name: str, version: str):
    return SimpleNamespace(name=SimpleNamespace(normalized=name), version=version)


def test_gpu_gets_nvcc_of_the_images_cuda_in_a_prefix_of_its_own():
    tools = toolset("gpu", [_record("pytorch", "2.14.1"), _record("cuda-cudart", "13.0.96")],
                    {"TORCH_CUDA_ARCH_LIST": "9.0", "MAX_JOBS": "2"})
    assert tools.conda_specs == ("cuda-nvcc 13.0.*", "cuda-cudart-dev ==13.0.96")
    assert tools.debian == ("g++", "make", "ninja-build", "git", "ccache")
    args = tools.engine_args()
    assert f"CUDA_HOME={DEV_PREFIX}" in args and f"CPATH={DEV_PREFIX}/targets/x86_64-linux/include" in args
    assert args[-4:] == ["-e", "TORCH_CUDA_ARCH_LIST", "-e", "MAX_JOBS"]   # by name: values stay in the caller's env
    assert tools.describe() == ("Debian g++, make, ninja-build, git, ccache; cuda-nvcc 13.0.*, cuda-cudart-dev ==13.0.96 "
                                "in /opt/build-dev")


def test_rocm_gets_debians_hipcc_and_cpu_only_compilers():
    rocm = toolset("rocm", [], {"PYTORCH_ROCM_ARCH": "gfx90a"})
    assert {"hipcc", "libamdhip64-dev", "rocm-device-libs"} <= set(rocm.debian) and not rocm.conda_specs
    assert "ROCM_HOME=/usr" in rocm.engine_args() and rocm.passed == ("PYTORCH_ROCM_ARCH",)
    cpu = toolset("cpu", [], {})
    assert cpu.debian == ("g++", "make", "ninja-build", "git", "ccache") and cpu.engine_args() == []


def test_a_gpu_image_without_cuda_runtime_is_one_line():
    with pytest.raises(FeedstockError, match="no cuda-cudart package"):
        toolset("gpu", [_record("pytorch", "2.14.1")], {})
