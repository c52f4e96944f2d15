"""The gpu flavour's build stage for real (issue 27, item 4): an image of the real PyTorch 2.14.1
CUDA 13.0 packages (the session's `cudawheel`: rattler-build's build of the feedstock's recipe
with the real cu130 wheel as payload, NVIDIA's runtime wheels as conda-forge-named packages),
from an environment file whose pip: section holds a small CUDAExtension sdist marked
--no-build-isolation.

The build stage gets nvcc as the image channels' `cuda-nvcc` (made here from NVIDIA's nvcc
wheels: tests/support/nvcc_package.py) in /opt/build-dev, compiles the kernel for sm_90
(TORCH_CUDA_ARCH_LIST passed by name), and only the wheel enters the image. No GPU here: the
image's python imports torch and the extension, the extension calls the CUDA runtime
(cudaRuntimeGetVersion needs no driver), its fatbinary holds sm_90 code, and the runtime image has
neither nvcc nor a C++ compiler. On a GPU machine the same image's `add_one` runs the kernel
(`--nv` for Apptainer, a GPU for podman): that is as far as this machine goes.

First run (2026-11-26, 2-core machine, the cudawheel fixture already built): 3 passed in 399 s, the
image with its build stage 299 s.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.image_rig import build_and_load_env_image, run_in_image
from tests.support.scratch import module_scratch
from tests.support.sdist import write_sdist

pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.container, pytest.mark.image, pytest.mark.download]

EXT_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(name="tiny-cuda-ext", version="0.1", packages=["tiny_cuda_ext"],
      ext_modules=[CUDAExtension("tiny_cuda_ext._C", ["csrc/add_one.cu", "csrc/bind.cpp"])],
      cmdclass={"build_ext": BuildExtension})
"""
EXT_KERNEL = """\
__global__ void add_one_kernel(float* data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += 1.0f;
}
void launch_add_one(float* data, int n) { add_one_kernel<<<(n + 127) / 128, 128>>>(data, n); }
"""
EXT_BIND = """\
#include <cuda_runtime_api.h>
#include <torch/extension.h>
void launch_add_one(float* data, int n);
torch::Tensor add_one(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "a float tensor on the GPU");
    auto y = x.contiguous().clone();
    launch_add_one(y.data_ptr<float>(), static_cast<int>(y.numel()));
    return y;
}
int runtime_version() { int v = 0; cudaRuntimeGetVersion(&v); return v; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add_one", &add_one);
    m.def("runtime_version", &runtime_version);
}
"""
CHECK = """\
import json, torch, tiny_cuda_ext._C as ext
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "available": torch.cuda.is_available(),
                  "runtime": ext.runtime_version(), "module": ext.__file__}))
"""


@pytest.fixture(scope="module")
def gpu_image(request: pytest.FixtureRequest, cudawheel: dict, cpythons: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    from tests.support.image_rig import skip_without_image_tools
    from tests.support.nvcc_package import nvcc_channel
    from tests.support.podman import private_podman
    from tests.support.toolchain import ToolchainUnavailable

    skip_without_image_tools()
    work = module_scratch(request, tmp_path_factory, "gpu-image")
    try:
        nvcc_channel(work / "nvcc-channel", work / "nvcc-work")
    except ToolchainUnavailable as err:
        pytest.skip(str(err))
    links = work / "links"
    links.mkdir()
    write_sdist(links / "tiny_cuda_ext-0.1.tar.gz", "tiny_cuda_ext-0.1",
                {"setup.py": EXT_SETUP, "tiny_cuda_ext/__init__.py": "", "csrc/add_one.cu": EXT_KERNEL,
                 "csrc/bind.cpp": EXT_BIND}, name="tiny-cuda-ext")
    ours, *others = cudawheel["channels"]
    channels = [ours, work / "nvcc-channel", *others]
    env_file = work / "env.yml"
    env_file.write_text("name: gpu-app\nchannels:\n" + "".join(f"  - {c}\n" for c in channels)
                        + "dependencies:\n  - pytorch-gpu\n  - python=3.11\n  - pip\n  - pip:\n"
                          "    - tiny-cuda-ext==0.1 --no-build-isolation\n")
    podman = private_podman(work / "podman")
    # the package cache cudawheel installed its prefix from: the CUDA libraries (gigabytes) are
    # unpacked there already, as for the matrix (test_dependents_matrix.py)
    built = build_and_load_env_image(podman, env_file, links, work / "out", "--host-python", str(cpythons["3.11"]),
                                     "--cuda", "13.0", "--pkgs-dir", str(cudawheel["work"] / "pkgs"),
                                     env={"TORCH_CUDA_ARCH_LIST": "9.0", "MAX_JOBS": "2"})
    print(f"gpu image with the build stage: {built['seconds']:.0f}s")
    yield {"work": work, "out": work / "out", "podman": podman, **built}
    podman.remove_own()


def _run(gpu_image: dict, *args: str) -> str:
    return run_in_image(gpu_image["podman"], gpu_image["info"]["name"], *args)


def test_nvcc_came_from_the_channels_and_compiled_for_the_asked_arch(gpu_image):
    said = gpu_image["stdout"]
    assert "image: build stage: Debian g++, make, ninja-build, git, ccache; cuda-nvcc 13.0.*, cuda-cudart-dev ==13.0.96 " \
           "in /opt/build-dev" in said, said[-2000:]
    assert "image: build stage: building tiny-cuda-ext==0.1 from tiny_cuda_ext-0.1.tar.gz" in said
    assert "(--no-wheel-cache: compiled again)" in said


def test_the_extension_imports_and_calls_the_cuda_runtime_in_the_image(gpu_image):
    result = json.loads(_run(gpu_image, "python", "-c", CHECK).strip().splitlines()[-1])
    assert result["torch"].startswith("2.14.1") and result["cuda"] == "13.0"
    assert result["available"] is False                 # no GPU on this machine
    assert result["runtime"] == 13000, result           # the image's libcudart, called from the extension
    assert result["module"].startswith("/opt/env/lib/python3.11/site-packages/tiny_cuda_ext/_C")


def test_the_kernel_is_sm_90_code_and_the_runtime_image_has_no_compiler(gpu_image, tmp_path):
    from tests.realbuild.cuda import fatbin_archs

    found = _run(gpu_image, "sh", "-c", "for c in nvcc gcc g++ cc c++ ptxas; do command -v $c; done; "
                                        "ls /opt/env/bin | grep -E '^(nvcc|ptxas|cicc)$'; echo done")
    assert found.strip() == "done", found
    gpu_image["podman"].run("create", "--name", "gpu-ext-copy", gpu_image["info"]["name"], timeout=300)
    # torch first, as for any torch extension: _C finds libc10.so through the loaded torch, not an rpath
    module = _run(gpu_image, "python", "-c", "import torch, tiny_cuda_ext._C as e; print(e.__file__)").strip()
    gpu_image["podman"].run("cp", f"gpu-ext-copy:{module}", str(tmp_path / "ext.so"), timeout=300)
    gpu_image["podman"].run("rm", "gpu-ext-copy", timeout=300)
    assert ("cubin", 90) in fatbin_archs(tmp_path / "ext.so")
