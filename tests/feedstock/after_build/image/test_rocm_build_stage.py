"""The rocm flavour's build stage for real (issue 27, item 4): an image of the test project's ROCm
7.2 packages (the session's `rocmbuild`: rattler-build's build of the feedstock's recipe for the
ROCm job, tests/support/megabuild_project as source, libtorch_hip compiled by this machine's
hipcc), from an environment file whose pip: section holds a small HIP extension sdist marked
--no-build-isolation.

The extension is a plain setuptools package whose build_ext runs hipcc itself, not torch's
CUDAExtension: the test project's "torch" is PyTorch-shaped but not PyTorch (no
torch.utils.cpp_extension, no ATen, no pybind11 headers). What it installs is what an extension
links: c10's header in include/, libc10 and libtorch_hip in lib/. So setup.py imports the image's
torch (which is why it must build without isolation), compiles one .hip file into a Python C-API
module with `hipcc --offload-arch=` for each target of PYTORCH_ROCM_ARCH (passed by name to the
build stage, as torch's own extension builder reads it), against torch/include, and links
torch/lib's libtorch_hip and libc10 with an rpath to them.

The build stage gets Debian's hipcc, libamdhip64-dev and rocm-device-libs (ROCM_HOME=/usr), and
only the wheel enters the image. No GPU here (no /dev/kfd): in the image, with no network, the
extension reports the HIP runtime's version (hipRuntimeGetVersion needs no device), gets
hipErrorNoDevice from hipGetDeviceCount and the runtime's error from its kernel path, and calls
into the image's libc10 and libtorch_hip. Its code object holds exactly the asked gfx targets
(roc-obj-ls, Debian's hipcc ships it), the runtime image has no hipcc, clang, gcc or g++, and its
Apptainer.def binds the host's ROCm with --rocm. On an AMD GPU machine the same image's
`twice([1.0, 2.0])` runs the kernel (`--rocm` for Apptainer, /dev/kfd and /dev/dri for podman):
that is as far as this machine goes.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.support.image_rig import build_and_load_env_image, run_in_image
from tests.support.paths import CPU_GENERIC_JOB, RECIPE_VERSION
from tests.support.scratch import module_scratch
from tests.support.sdist import write_sdist

pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.container, pytest.mark.image, pytest.mark.download]

# not the packages' targets (conftest.ROCM_PACKAGE_ARCH: gfx90a;gfx1030): the extension's must be
# the ones passed to the build stage
EXT_ARCH = "gfx908;gfx1030"
EXT_SETUP = '''\
import os
import subprocess
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

import torch   # the image's own torch: its headers and libraries are what this links


class HipBuild(build_ext):
    """hipcc compiles and links the whole module: the test project's torch has no cpp_extension."""

    def build_extension(self, ext):
        arch = [a for a in os.environ.get("PYTORCH_ROCM_ARCH", "").replace(",", ";").split(";") if a]
        if not arch:
            raise SystemExit("error: PYTORCH_ROCM_ARCH is empty; name the gfx targets to compile for")
        torch_dir = Path(torch.__file__).parent
        out = Path(self.get_ext_fullpath(ext.name))
        out.parent.mkdir(parents=True, exist_ok=True)
        hipcc = Path(os.environ.get("ROCM_HOME", "/opt/rocm")) / "bin" / "hipcc"
        command = [str(hipcc), "-O2", "-fPIC", "-shared", "-std=c++17",
                   *[f"--offload-arch={a}" for a in arch],
                   "-I", sysconfig.get_paths()["include"], "-I", str(torch_dir / "include"), *ext.sources,
                   "-L", str(torch_dir / "lib"), "-ltorch_hip", "-lc10", "-Wl,-rpath,$ORIGIN/../torch/lib",
                   "-o", str(out)]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)


setup(name="tiny-hip-ext", version="0.1", packages=["tiny_hip_ext"],
      ext_modules=[Extension("tiny_hip_ext._C", ["csrc/tiny_hip.hip"])], cmdclass={"build_ext": HipBuild})
'''
EXT_HIP = r"""// tiny_hip_ext._C: one HIP kernel, compiled by hipcc for every gfx target of PYTORCH_ROCM_ARCH,
// and host functions that run without a GPU. Built against the image's torch: its c10 header
// and libraries (libc10, libtorch_hip), found through `import torch` in setup.py.
#include <Python.h>
#include <hip/hip_runtime.h>

#include <c10/Core.h>
#include <string>
#include <vector>

namespace at {
namespace cuda {
bool have_kernels();  // libtorch_hip of the test project (hipified: the namespace stays)
}  // namespace cuda
}  // namespace at

__global__ void twice_kernel(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= 2.0f;
}

static PyObject* fail(hipError_t err, const char* what) {
  PyErr_Format(PyExc_RuntimeError, "%s: %s", what, hipGetErrorName(err));
  return nullptr;
}

// the kernel on the GPU; without one, the HIP runtime's error as a RuntimeError
static PyObject* twice(PyObject*, PyObject* arg) {
  PyObject* seq = PySequence_Fast(arg, "a sequence of floats");
  if (!seq) return nullptr;
  int n = static_cast<int>(PySequence_Fast_GET_SIZE(seq));
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i)));
  Py_DECREF(seq);
  if (PyErr_Occurred()) return nullptr;
  float* device = nullptr;
  hipError_t err = hipMalloc(&device, n * sizeof(float));
  if (err != hipSuccess) return fail(err, "hipMalloc");
  err = hipMemcpy(device, host.data(), n * sizeof(float), hipMemcpyHostToDevice);
  if (err == hipSuccess) {
    hipLaunchKernelGGL(twice_kernel, dim3((n + 63) / 64), dim3(64), 0, 0, device, n);
    err = hipGetLastError();
  }
  if (err == hipSuccess) err = hipMemcpy(host.data(), device, n * sizeof(float), hipMemcpyDeviceToHost);
  (void)hipFree(device);  // the first error is the one to report
  if (err != hipSuccess) return fail(err, "twice");
  PyObject* out = PyList_New(n);
  for (int i = 0; i < n; ++i) PyList_SET_ITEM(out, i, PyFloat_FromDouble(host[i]));
  return out;
}

static PyObject* runtime_version(PyObject*, PyObject*) {
  int version = 0;
  hipError_t err = hipRuntimeGetVersion(&version);
  return Py_BuildValue("(si)", hipGetErrorName(err), version);
}

static PyObject* device_count(PyObject*, PyObject*) {
  int count = 0;
  hipError_t err = hipGetDeviceCount(&count);
  return Py_BuildValue("(si)", hipGetErrorName(err), count);
}

static PyObject* torch_join(PyObject*, PyObject*) {
  return PyUnicode_FromString(c10::join("tiny", "hip").c_str());
}

static PyObject* torch_hip_kernels(PyObject*, PyObject*) {
  return PyBool_FromLong(at::cuda::have_kernels());
}

static PyMethodDef methods[] = {
    {"twice", twice, METH_O, "Double each value with the HIP kernel (needs a GPU)."},
    {"runtime_version", runtime_version, METH_NOARGS, "hipRuntimeGetVersion: (error name, version)."},
    {"device_count", device_count, METH_NOARGS, "hipGetDeviceCount: (error name, count)."},
    {"torch_join", torch_join, METH_NOARGS, "c10::join from the image's libc10."},
    {"torch_hip_kernels", torch_hip_kernels, METH_NOARGS, "at::cuda::have_kernels from libtorch_hip."},
    {nullptr, nullptr, 0, nullptr},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tiny_hip_ext._C", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""
CHECK = """\
import json, torch, tiny_hip_ext._C as ext
try:
    ext.twice([1.0, 2.0])
    kernel = "ran"
except RuntimeError as err:
    kernel = str(err)
maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libtorch_hip" in line or "libamdhip64" in line})
print(json.dumps({"torch": torch.__file__, "self_test": torch.self_test(), "module": ext.__file__,
                  "runtime": ext.runtime_version(), "devices": ext.device_count(), "kernel": kernel,
                  "join": ext.torch_join(), "torch_hip_kernels": ext.torch_hip_kernels(), "maps": maps}))
"""


@pytest.fixture(scope="module")
def rocm_image(request: pytest.FixtureRequest, rocmbuild: dict, cpythons: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    from tests.support.image_rig import skip_without_image_tools
    from tests.support.podman import private_podman

    skip_without_image_tools()
    python = rocmbuild["python"]
    work = module_scratch(request, tmp_path_factory, "rocm-image")
    links = work / "links"
    links.mkdir()
    write_sdist(links / "tiny_hip_ext-0.1.tar.gz", "tiny_hip_ext-0.1",
                {"setup.py": EXT_SETUP, "tiny_hip_ext/__init__.py": "", "csrc/tiny_hip.hip": EXT_HIP}, name="tiny-hip-ext")
    env_file = work / "env.yml"
    # setuptools: the sdist builds without isolation, with the environment's own
    env_file.write_text("name: rocm-app\nchannels:\n" + "".join(f"  - {c}\n" for c in rocmbuild["channels"])
                        + f"dependencies:\n  - pytorch-rocm\n  - python={python}\n  - pip\n  - setuptools\n"
                          "  - pip:\n    - tiny-hip-ext==0.1 --no-build-isolation\n")
    podman = private_podman(work / "podman")
    built = build_and_load_env_image(podman, env_file, links, work / "out", "--host-python", str(cpythons[python]),
                                     env={"PYTORCH_ROCM_ARCH": EXT_ARCH, "MAX_JOBS": "2"})
    print(f"rocm image with the build stage: {built['seconds']:.0f}s")
    yield {"work": work, "out": work / "out", "podman": podman, **built}
    podman.remove_own()


def _run(rocm_image: dict, *args: str) -> str:
    return run_in_image(rocm_image["podman"], rocm_image["info"]["name"], *args)


def _from_layer(rocm_image: dict, role: str, dest: Path, wanted) -> tuple[list[str], dict[str, Path]]:
    """The names in one layer of the image, and the files among them that `wanted(name)` picks,
    written under dest (name -> path)."""
    algo, digest = rocm_image["info"]["layers"][role].split(":")
    picked: dict[str, Path] = {}
    with tarfile.open(fileobj=gzip.open(rocm_image["out"] / "oci" / "blobs" / algo / digest)) as tar:
        for member in tar.getmembers():
            if member.isfile() and wanted(member.name):
                picked[member.name] = dest / role / Path(member.name).name
                picked[member.name].parent.mkdir(parents=True, exist_ok=True)
                picked[member.name].write_bytes(tar.extractfile(member).read())
        return tar.getnames(), picked


def _gfx_targets(library: Path) -> set[str]:
    listing = subprocess.run(["roc-obj-ls", str(library)], capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    return {line.split()[1].rsplit("--", 1)[-1] for line in listing.stdout.splitlines() if "amdgcn-amd-amdhsa" in line}


def test_the_rocm_packages_were_built_by_the_feedstock_recipe(rocmbuild):
    names = rocmbuild["build"].names()
    v, py = RECIPE_VERSION, rocmbuild["python"].replace(".", "")
    for prefix in (f"libtorch-{v}-rocm72_generic_h", f"pytorch-{v}-rocm72_generic_py{py}_h",
                   f"pytorch-rocm-{v}-rocm72_generic_h"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    assert not [n for n in names if n.startswith("libtorch-cuda-linalg")], names   # CUDA only


def test_the_image_is_rocm_flavoured_and_hipcc_built_the_extension(rocm_image):
    info, said = rocm_image["info"], rocm_image["stdout"]
    assert info["flavour"] == "rocm" and info["python_version"].startswith("3.12")
    assert list(info["layers"]) == ["base", "torch", "environment", "requirements"]
    assert "image: build stage: 1 package(s) to build against the image's torch (--no-wheel-cache: compiled again)" in said
    assert "image: build stage: building tiny-hip-ext==0.1 from tiny_hip_ext-0.1.tar.gz" in said, said[-2000:]
    assert "image: build stage: built tiny_hip_ext-0.1-cp312-cp312-linux_x86_64.whl" in said, said[-2000:]


def test_the_extension_imports_and_calls_hip_and_torch_without_a_gpu(rocm_image):
    result = json.loads(_run(rocm_image, "python", "-c", CHECK).strip().splitlines()[-1])
    site = "/opt/env/lib/python3.12/site-packages"
    assert result["torch"] == f"{site}/torch/__init__.py" and result["self_test"] > 0
    assert result["module"].startswith(f"{site}/tiny_hip_ext/_C.cpython-312-")
    error, version = result["runtime"]
    assert error == "hipSuccess" and version // 10_000_000 == 5, result   # the base's Debian HIP 5.x runtime
    assert result["devices"] == ["hipErrorNoDevice", 0], result           # no /dev/kfd in the container
    assert result["kernel"].startswith("hipMalloc: hipError"), result     # the kernel path reached HIP
    assert result["join"] == "tiny/hip" and result["torch_hip_kernels"] is True   # libc10, libtorch_hip
    # the image's libtorch_hip, and the HIP runtime of the base (Debian's, not the environment's)
    assert [m for m in result["maps"] if "libtorch_hip" in m] == ["/opt/env/lib/libtorch_hip.so"], result
    hip_runtime = [m for m in result["maps"] if "libamdhip64" in m]
    assert len(hip_runtime) == 1, result
    assert re.fullmatch(r"(/usr)?/lib/x86_64-linux-gnu/libamdhip64\.so\.5[.\d]*", hip_runtime[0]), result


def test_the_code_objects_hold_the_asked_gfx_targets(rocm_image, rocmbuild, tmp_path):
    if shutil.which("roc-obj-ls") is None:
        pytest.skip("roc-obj-ls not found (Debian: part of hipcc)")
    names, modules = _from_layer(rocm_image, "requirements", tmp_path,
                                 lambda name: "/tiny_hip_ext/_C." in name and name.endswith(".so"))
    assert len(modules) == 1, names
    assert _gfx_targets(*modules.values()) == set(EXT_ARCH.split(";"))
    # only the wheel's files entered: no source, no object
    assert not [n for n in names if n.endswith((".hip", ".o", ".cpp")) or "/build/" in n], names
    # the package's own library: hipcc in the rattler-build job, for the packages' targets
    _, libraries = _from_layer(rocm_image, "torch", tmp_path, lambda name: name.endswith("opt/env/lib/libtorch_hip.so"))
    assert len(libraries) == 1, libraries
    assert _gfx_targets(*libraries.values()) == set(rocmbuild["arch"].split(";"))


def test_the_runtime_image_has_no_compiler(rocm_image):
    found = _run(rocm_image, "sh", "-c", "for c in hipcc clang clang++ clang-15 clang++-15 gcc g++ cc c++; do "
                                         "command -v $c; done; ls /usr/bin /opt/env/bin | grep -E "
                                         "'hipcc|clang|gcc|g\\+\\+' ; ls -d /usr/lib/llvm-*/bin/clang* 2>/dev/null; "
                                         "echo done")
    assert found.strip() == "done", found
    assert "No broken requirements found" in _run(rocm_image, "python", "-m", "pip", "check")


def test_the_apptainer_recipe_binds_the_hosts_rocm(rocm_image):
    recipe = (rocm_image["out"] / "Apptainer.def").read_text()
    assert "apptainer run --rocm pytorch.sif" in recipe and "apptainer exec --rocm --bind" in recipe
    assert "Bootstrap: docker-archive\nFrom: image.tar\n" in recipe


def test_the_rocm_job_needs_no_more_than_the_cpu_toolchain(tmp_path):
    """The toolchain channel built for the cpu job serves the ROCm job: the recipe renders the
    same requirements for both (ROCm itself is the system's), so `rocmbuild` adds no package."""
    pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")
    from tests.realbuild.feedstock_build import copy_recipe, prepare_project_source
    from tests.realbuild.rocm_job import PYTHON, ROCM_JOB
    from tests.realbuild.session import machine_variant
    from tests.support.toolchain import needed_requirements

    versions = {"gcc": "12.2.0", "glibc": "2.36"}   # only the variant's values: no machine needed
    recipe = copy_recipe(tmp_path / "recipe", prepare_project_source(tmp_path / "source", "scikit-build-core"))
    needed = {job: needed_requirements(recipe, machine_variant(job, (PYTHON,), versions, tmp_path / f"{job}.yaml"))
              for job in (CPU_GENERIC_JOB, ROCM_JOB)}
    assert needed[ROCM_JOB] == needed[CPU_GENERIC_JOB]
    assert "python" in needed[ROCM_JOB] and not [n for n in needed[ROCM_JOB] if "rocm" in n or "hip" in n]
