"""pytorch-gpu from PyTorch's real 2.14.1 CUDA 13.0 binaries, packaged and installed for real (issue 16).

A copy of the feedstock is bumped to 2.14.1 by `python -m feedstock bump` (the source is a
stand-in tarball: the wheel front end supplies the payload; tests/realbuild/cuda_wheel_job.py).
NVIDIA's runtime wheels are repackaged under conda-forge's names with their libraries in
$PREFIX/lib (tests/support/nvidia_wheels.py, cached outside the repository). rattler-build
builds the CUDA 13.0 job of that copy (libtorch, libtorch-cuda-linalg, pytorch, pytorch-tests,
pytorch-gpu), running every output's own tests, with the real torch-2.14.1 cp311 cu130 wheel as
the payload; py-rattler installs pytorch-gpu with `__cuda=13.0` into a fresh prefix elsewhere,
where the checks below run. No GPU driver is needed (none is on this machine).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from common.links import link_or_copy
from feedstock.after_build import compile_cache as compiles
from tests.support.ccache_launch import cmake_ccache
from tests.support.paths import REPO_ROOT
from tests.support.real_wheel.cuda_wheel import links_magma

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")
pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

from megabuild.build_env import cuda_arch_list  # noqa: E402
from tests.realbuild.cuda import fatbin_archs  # noqa: E402
from tests.realbuild.feedstock_build import ChannelIncomplete, check_channel  # noqa: E402
from tests.realbuild.install import (run_clean as run, SolveError, escaping_symlinks, files_in_two_packages,  # noqa: E402
                                     installed_files, run_paths_outside, solve)
from tests.support.toolchain import index_channel  # noqa: E402
from tests.realbuild.real_packages import (CUDA, CUDA_TAG as TAG, CUDA_VERSION as VERSION,  # noqa: E402
                                          GPU_PACKAGES as OUR_PACKAGES, WHEEL_PYTHON as PYTHON)

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.download]


def python_json(cudawheel: dict, code: str):
    return json.loads(run([cudawheel["python"], "-c", code]).stdout.strip().splitlines()[-1])


def test_bumped_copy_built_every_gpu_output(cudawheel):
    recipe = (cudawheel["feedstock"] / "recipe" / "recipe.yaml").read_text()
    assert f'version: "{VERSION}"' in recipe and 'triton: "3.8.0"' in recipe  # bump, from the wheel
    names = cudawheel["build"].names()
    for prefix in (f"libtorch-{VERSION}-{TAG}_generic_h", f"libtorch-cuda-linalg-{VERSION}-{TAG}_magma_generic_h",
                   f"pytorch-{VERSION}-{TAG}_generic_py311_h", f"pytorch-gpu-{VERSION}-{TAG}_generic_h"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    # the wheel carries the MAGMA flavour only: no nomagma package was made from it
    assert not any("nomagma" in n for n in names), names
    libtorch = next(p for p in cudawheel["build"].packages if p.name.startswith("libtorch-2"))
    assert libtorch.stat().st_size > 300 * 2**20  # libtorch_cuda.so alone is ~480 MB unpacked


MAPS_CODE = ("import json, torch; maps = sorted({l.split()[-1] for l in open('/proc/self/maps') "
             "if '.so' in l.split()[-1]}); print(json.dumps([torch.__version__, torch.version.cuda, "
             "torch.cuda.is_available(), torch.backends.cudnn.version(), maps]))")


def test_import_torch_without_a_driver_loads_the_packaged_cuda_libraries(cudawheel):
    prefix = cudawheel["prefix"]
    version, cuda, available, cudnn, maps = python_json(cudawheel, MAPS_CODE)
    assert version.split("+")[0] == VERSION and cuda == CUDA and available is False
    assert cudnn == 92400  # cuDNN 9.24 from the libcudnn package
    for soname in ("libcudnn.so.9", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2",
                   "libcusparseLt.so.0", "libcufile.so.0", "libnvshmem_host.so.3", "libtorch_cuda.so"):
        assert str(prefix / "lib" / soname) in maps, (soname, [m for m in maps if "prefix" not in m][:20])
    assert not [m for m in maps if "/nvidia/" in m], maps
    assert not list((prefix / f"lib/python{PYTHON}/site-packages").glob("nvidia*")), "pip's NVIDIA wheels"


def test_cudart_is_the_packaged_one(cudawheel):
    """torch/__init__.py dlopens site-packages/torch/lib/libtorch_global_deps.so by path, and
    glibc expands its `$ORIGIN` to the folder it was opened from. A symlink there looked for
    libcudart in torch/lib, then in ld.so.cache (this machine's /usr/local/cuda), never in
    $PREFIX/lib: the layout keeps that one library a real file whose run path reaches
    $PREFIX/lib. The stand-in python has a RUNPATH only, so no interpreter RPATH (conda-forge's
    python has `$ORIGIN/../lib`) helps here: the harsher case, as for an embedding program."""
    prefix = cudawheel["prefix"]
    kept = prefix / f"lib/python{PYTHON}/site-packages/torch/lib/libtorch_global_deps.so"
    assert kept.is_file() and not kept.is_symlink()
    *_, maps = python_json(cudawheel, MAPS_CODE)
    assert str(prefix / "lib" / "libcudart.so.13") in maps
    assert not [m for m in maps if "/usr/local/cuda" in m], maps


def test_no_run_path_outside_origin_and_the_prefix(cudawheel):
    """Every library of the environment, ours and the repackaged NVIDIA ones (whose wheels'
    entries such as `$ORIGIN/../../cublas/lib` are trimmed to `$ORIGIN`), finds what it needs
    through $ORIGIN inside the prefix. (The stand-in python links the pyenv install's
    libpython by an absolute path: a toolchain stand-in, not a package of this feedstock.)"""
    packages = set(installed_files(cudawheel["prefix"])) - {"python"}
    assert {"libcudnn", "libcublas", "nccl"} <= packages
    assert run_paths_outside(cudawheel["prefix"], packages) == []


def test_arch_list_against_the_drivers_table(cudawheel):
    """The arch list torch reports against what our driver compiles for CUDA 13.0, and the device
    code the library really holds (recipe/README.md, "CUDA architectures: the 2.14.1 wheel
    against the driver", keeps the measured lists)."""
    reported = python_json(cudawheel, "import json, torch; print(json.dumps(torch._C._cuda_getArchFlags().split()))")
    wheel = {int(a.split("_")[1]) for a in reported}
    device_code = fatbin_archs(cudawheel["prefix"] / "lib" / "libtorch_cuda.so")
    cubins = {a for kind, a in device_code if kind == "cubin"}
    assert wheel <= cubins  # every reported arch has device code
    ours = {int(a.replace("+PTX", "").replace(".", "")) for a in cuda_arch_list(CUDA).split(";")}
    section = (REPO_ROOT / "recipe" / "README.md").read_text().split(
        "## CUDA architectures: the 2.14.1 wheel against the driver", 1)[1]

    def listed(label: str) -> list[str]:
        return re.findall(r"sm_(\d+)", re.search(rf"{re.escape(label)}[^:\n]*: ([^\n]*)", section).group(1))

    assert listed("reported by torch") == [str(a) for a in sorted(wheel)]
    assert listed("cubins in libtorch_cuda.so") == [str(a) for a in sorted(cubins)]
    assert listed("only in our driver's list") == [str(a) for a in sorted(ours - wheel)]
    assert listed("only in the wheel's list") == [str(a) for a in sorted(wheel - ours)]
    assert ("ptx", max(ours)) not in device_code  # the wheel ships no PTX; ours does (12.0+PTX)


def test_pip_check(cudawheel):
    assert "No broken requirements found" in run([cudawheel["python"], "-m", "pip", "check"]).stdout


def test_cmake_test_with_cuda_and_the_machines_nvcc(cudawheel, tmp_path):
    prefix, build = cudawheel["prefix"], tmp_path / "build"
    project = tmp_path / "cmake_test"
    shutil.copytree(REPO_ROOT / "recipe" / "cmake_test", project)
    toolkit = cudawheel["activations"]["cuda-nvcc_linux-64"]
    launcher = cmake_ccache(build, prefix, project)
    # what conda's nvcc activation passes: the toolkit root (Caffe2's config still uses the old
    # FindCUDA) and the prefix, where cuda-nvrtc-dev & co. put their libraries
    out = run(["cmake", "-S", project, "-B", build, "-G", "Ninja", "-DWITH_TORCH_PYTHON=ON",
               f"-DTorch_DIR={prefix / 'share/cmake/Torch'}", f"-DPython3_EXECUTABLE={cudawheel['python']}",
               f"-DCMAKE_CUDA_COMPILER={toolkit['CUDACXX']}", f"-DCUDA_TOOLKIT_ROOT_DIR={toolkit['CUDA_HOME']}",
               f"-DCUDAToolkit_ROOT={toolkit['CUDA_HOME']}", f"-DCMAKE_PREFIX_PATH={prefix}", *launcher.defines],
              launcher.env).stdout
    cache = (build / "CMakeCache.txt").read_text()
    assert f"CUDA_NVCC_EXECUTABLE:FILEPATH={toolkit['CUDA_HOME']}/bin/nvcc\n" in cache, out[-2000:]
    run(["cmake", "--build", build], launcher.env)
    assert launcher.compiled() is None or launcher.compiled() >= 2  # main.cpp and ext.cpp, through the launcher
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import torch_smoke_ext; "
            "print(float(torch_smoke_ext.scaled_sum(torch.ones(4), 2.5)))")
    assert run([cudawheel["python"], "-c", code, build]).stdout.strip() == "10.0"


def test_downstream_cuda_extension_compiles_with_nvcc_and_loads(cudawheel, tmp_path):
    src = tmp_path / "cuda_ext"
    src.mkdir()
    (src / "kernel.cu").write_text(
        "#include <torch/extension.h>\n"
        "__global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;"
        " if (i < n) x[i] *= a; }\n"
        "int threads() { return 128; }\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"threads\", &threads); }\n")
    (src / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        "setup(name='cuda-ext', version='0.1', ext_modules=[CUDAExtension('cuda_ext', ['kernel.cu'])],\n"
        "      cmdclass={'build_ext': BuildExtension})\n")
    cuda_home = cudawheel["activations"]["cuda-nvcc_linux-64"]["CUDA_HOME"]  # the toolkit behind nvcc
    env = {"MAX_JOBS": "2", "CFLAGS": "-O0 -g0", "CUDA_HOME": cuda_home, "TORCH_CUDA_ARCH_LIST": "7.5"}
    stats = tmp_path / "ccache-stats.log"
    if shutil.which("ccache"):
        # nvcc through the machine's ccache (torch's ninja build takes PYTORCH_NVCC): the compile
        # still runs through the launcher and is counted, and a later run is served its object.
        # The base folder is the run's, above both this folder and the installed prefix.
        base = os.path.commonpath([tmp_path, cudawheel["prefix"]])
        env.update({**compiles.environment(compiles.default_folder(), str(stats), base_dir=base),
                    "PYTORCH_NVCC": f"ccache {cuda_home}/bin/nvcc"})
    run([cudawheel["python"], "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "--no-index", src], env)
    assert run([cudawheel["python"], "-c", "import torch, cuda_ext; print(cuda_ext.threads())"]).stdout.strip() == "128"
    built = next((cudawheel["prefix"] / f"lib/python{PYTHON}/site-packages").glob("cuda_ext*.so"))
    assert ("cubin", 75) in fatbin_archs(built)  # nvcc compiled the kernel
    if shutil.which("ccache"):
        assert compiles.count_compiles(stats).compiled == 1, stats.read_text() if stats.exists() else "no stats log"


def test_torch_compile_on_cpu_uses_the_installed_headers(cudawheel, tmp_path):
    code = ("import torch; f = torch.compile(lambda x: torch.sin(x) + torch.cos(x)); x = torch.randn(16); "
            "print(bool(torch.allclose(f(x), torch.sin(x) + torch.cos(x))))")
    # TMPDIR: inductor keeps its precompiled headers under tempfile's folder whatever the cache dir
    out = run([cudawheel["python"], "-c", code], {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
                                                  "TMPDIR": str(tmp_path)})
    assert out.stdout.strip().splitlines()[-1] == "True"
    assert list((tmp_path / "inductor").rglob("*.so")), "inductor compiled no C++ kernel"


def test_solver_rules_on_the_real_packages(cudawheel):
    with pytest.raises(SolveError) as err:
        solve(cudawheel["channels"], ["pytorch-gpu"], cuda="")
    assert "__cuda" in str(err.value)
    linalg = [r for r in cudawheel["records"] if r.name.normalized == "libtorch-cuda-linalg"]
    assert [str(r.build).split("_h")[0] for r in linalg] == [f"{TAG}_magma_generic"]


def test_linalg_package_holds_the_wheels_static_magma_library(cudawheel):
    prefix = cudawheel["prefix"]
    library = prefix / "lib" / "libtorch_cuda_linalg.so"
    assert installed_files(prefix)["libtorch-cuda-linalg"] == ["lib/libtorch_cuda_linalg.so"]
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True).stdout
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    assert "libmagma" not in dynamic and re.search(r" T magma_init$", symbols, re.MULTILINE)  # static MAGMA
    assert links_magma(library)  # what the recipe's flavour test greps for


def test_installed_prefix_is_clean(cudawheel):
    prefix = cudawheel["prefix"]
    assert files_in_two_packages(prefix) == {}
    assert escaping_symlinks(prefix, OUR_PACKAGES) == []
    assert (prefix / f"lib/python{PYTHON}/site-packages/torch/lib/libtorch_cuda.so").is_symlink()


def _channel_without(channel: Path, names: set[str], dest: Path) -> Path:
    """A copy of `channel` (hard links, copies across filesystems) without the packages `names`,
    indexed by rattler from the original's repodata: it drops the missing packages' entries
    instead of reading every other package again (2 GB of NVIDIA packages)."""
    (dest / "linux-64").mkdir(parents=True)
    for package in channel.glob("linux-64/*.conda"):
        if package.name.rsplit("-", 2)[0] not in names:
            link_or_copy(package, dest / "linux-64" / package.name)
    for repodata in channel.glob("*/repodata.json"):
        (dest / repodata.parent.name).mkdir(exist_ok=True)
        shutil.copy2(repodata, dest / repodata.parent.name / repodata.name)
    index_channel(dest)
    return dest


def test_missing_cuda_library_is_named_before_building_and_at_install(cudawheel, tmp_path):
    """A channel without cuBLAS: the build stops before it starts, and the install's solve,
    each with one line naming the package."""
    partial = _channel_without(cudawheel["nvidia"], {"libcublas", "libcublas-dev"}, tmp_path / "partial")
    with pytest.raises(ChannelIncomplete) as err:
        check_channel(cudawheel["recipe"], cudawheel["variant"], cudawheel["toolchain"].channel,
                      (partial, cudawheel["extras"]))
    assert "'libcublas-dev'" in str(err.value) and "\n" not in str(err.value)
    channels = [cudawheel["build"].output_dir, cudawheel["toolchain"].channel, partial, cudawheel["extras"]]
    with pytest.raises(SolveError) as err:
        solve(channels, ["pytorch-gpu"], cuda=CUDA)
    assert "libcublas" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("job_cuda", ["12.9", "None"])
def test_wheel_of_another_cuda_version_is_refused_before_anything_is_written(cuda_torch_wheel, pytorch_cmakecache_dir,
                                                                             tmp_path, job_cuda):
    from types import SimpleNamespace

    from megabuild.errors import MegabuildError
    from tests.support.real_wheel.wheel_frontend import WheelFrontend

    ctx = SimpleNamespace(src_dir=tmp_path / "src", python=Path(os.sys.executable), env={},
                          variant={"cuda_compiler_version": job_cuda})
    with pytest.raises(MegabuildError) as err:
        WheelFrontend(cuda_torch_wheel, pytorch_cmakecache_dir).build(ctx)
    job = "CPU" if job_cuda == "None" else f"CUDA {job_cuda}"
    assert str(err.value).startswith(f"{cuda_torch_wheel.name} is built for CUDA {CUDA}, the job for {job};")
    assert "\n" not in str(err.value) and not (tmp_path / "src").exists()
