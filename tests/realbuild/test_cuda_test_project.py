"""The CUDA job built for real: rattler-build with this machine's nvcc, py-rattler installs it.

The generic-BLAS CUDA job of .ci_support whose CUDA version is the machine's nvcc is built from
the feedstock's recipe.yaml (source: the PyTorch-shaped tests/support/megabuild_project) for one Python
(3.12, the recipe's split_python), through the same path as the cpu job (tests/realbuild/test_cpu_test_project.py).
The toolchain channel's cuda-nvcc_linux-64 points CUDACXX at the real nvcc, so the test
project's cuda/Kernels.cu is compiled for the driver's TORCH_CUDA_ARCH_LIST against the real
CUDA headers and links the real cudart of that toolkit; the CUDA -dev host packages are empty
stand-ins (the test project links none of them). Like localbuild/in_container/build_steps.sh, the build runs
with CONDA_OVERRIDE_CUDA set to the job's CUDA version: the host environments of
libtorch-cuda-linalg and pytorch contain libtorch, which requires `__cuda`.

`pytorch-gpu` is then solved from the built channel (plus the toolchain channel) with `__cuda`
overridden, once as users get it (MAGMA) and once asking for nomagma, and installed into
fresh prefixes at another path. No GPU is needed: libtorch_cuda loads without a driver.
As for the cpu job, the recipe's own test sections (which ask for real PyTorch) are off.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")
pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

from feedstock.after_build import compile_cache as compiles  # noqa: E402
from megabuild.build_env import cuda_arch_list  # noqa: E402
from megabuild.compile_cache import STATS_LOG_NAME  # noqa: E402
from tests.realbuild.cuda import cuda_job, fatbin_archs, nvcc_major_minor  # noqa: E402
from tests.realbuild.feedstock_build import build_feedstock  # noqa: E402
from tests.realbuild.install import (SolveError, absolute_rpaths, escaping_symlinks,  # noqa: E402
                                     files_in_two_packages, install_from_channel, installed_files,
                                     leaked_paths, solve)
from tests.realbuild.session import machine_ready, prepare_job  # noqa: E402
from tests.support.paths import RECIPE_VERSION  # noqa: E402
from tests.support.toolchain import ToolchainUnavailable  # noqa: E402

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.download]

PYTHON = "3.12"  # the recipe's split_python: the staging output builds with it in any case
OUR_PACKAGES = {"libtorch", "libtorch-cuda-linalg", "pytorch", "pytorch-gpu"}
FLAVOURS = ("magma", "nomagma")
# what users get without asking (the recipe down-prioritizes nomagma), and how to ask for nomagma
FLAVOUR_SPECS = {"magma": [], "nomagma": ["libtorch-cuda-linalg * *nomagma*"]}


@pytest.fixture(scope="session")
def cudabuild(tmp_path_factory: pytest.TempPathFactory, cpythons: dict[str, Path]) -> dict:
    if PYTHON not in cpythons:
        pytest.skip(f"the CUDA real build needs CPython {PYTHON} (pyenv)")
    try:
        versions = machine_ready()
        cuda = nvcc_major_minor(versions)
        job = cuda_job(cuda)
    except ToolchainUnavailable as err:
        pytest.skip(str(err))
    prepared = prepare_job(tmp_path_factory.mktemp("realbuild-cuda"), job, {PYTHON: cpythons[PYTHON]}, versions)
    work = prepared.work
    environ = {"FEEDSTOCK_MAX_JOBS": "2", "CONDA_OVERRIDE_CUDA": cuda}
    if shutil.which("ccache"):
        # the driver's compile cache (the recipe's FEEDSTOCK_COMPILE_CACHE) in the machine's ccache
        # folder: every file still goes through ccache and is counted (below); a machine that
        # compiled the same sources before serves nvcc's objects
        environ["FEEDSTOCK_COMPILE_CACHE"] = str(compiles.default_folder())
    build = build_feedstock(prepared.recipe, prepared.variant, prepared.toolchain.channel,
                            work / "build_artifacts", environ=environ)
    channels = [build.output_dir, prepared.toolchain.channel]
    prefixes, records = {}, {}
    for flavour in FLAVOURS:
        prefixes[flavour] = work / "elsewhere" / flavour
        records[flavour] = install_from_channel(channels[0], ["pytorch-gpu", *FLAVOUR_SPECS[flavour]],
                                                prefixes[flavour], cuda=cuda, cache=work / "pkgs",
                                                extra_channels=channels[1:])
    return {"work": work, "cuda": cuda, "job": job, "toolchain": prepared.toolchain, "build": build,
            "channels": channels, "prefixes": prefixes, "records": records}


def _run_python(prefix: Path, code: str) -> str:
    proc = subprocess.run([prefix / "bin" / "python", "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_all_cuda_outputs_built(cudabuild):
    names = cudabuild["build"].names()
    tag = "cuda" + cudabuild["cuda"].replace(".", "")
    v = RECIPE_VERSION
    expected = [f"libtorch-{v}-{tag}_generic_h", f"libtorch-cuda-linalg-{v}-{tag}_magma_generic_h",
                f"libtorch-cuda-linalg-{v}-{tag}_nomagma_generic_h",
                f"pytorch-{v}-{tag}_generic_py{PYTHON.replace('.', '')}_h", f"pytorch-gpu-{v}-{tag}_generic_h"]
    for prefix in expected:
        assert any(n.startswith(prefix) and n.endswith("_200.conda") for n in names), (prefix, names)


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed (apt-get install ccache)")
def test_every_compile_went_through_the_drivers_compile_cache(cudabuild):
    """The split step's translation units, Kernels.cu among them, each went through ccache
    (served from the machine's cache or compiled): counted from the driver's stats log."""
    logs = list(cudabuild["build"].output_dir.glob(f"bld/**/{STATS_LOG_NAME}"))
    assert logs, "the driver wrote no ccache stats log: was FEEDSTOCK_COMPILE_CACHE passed to the build?"
    assert sum(compiles.count_compiles(log).compiled for log in logs) >= 2


def test_nvcc_compiled_the_kernels_for_the_arch_list(cudabuild):
    """The installed libtorch_cuda holds device code for every TORCH_CUDA_ARCH_LIST entry:
    the real nvcc compiled cuda/Kernels.cu in the package build."""
    arches = {int(a.replace("+PTX", "").replace(".", "")) for a in cuda_arch_list(cudabuild["cuda"]).split(";")}
    found = fatbin_archs(cudabuild["prefixes"]["magma"] / "lib" / "libtorch_cuda.so")
    assert {arch for kind, arch in found if kind == "cubin"} == arches
    assert ("ptx", max(arches)) in found  # +PTX: code for GPUs newer than the list


def test_cuda_toolkit_is_the_machines(cudabuild):
    """CMake compiled with the nvcc of the toolchain's cuda-nvcc_linux-64 activation (the
    toolkit's own binary, not the PATH entry), and took the CUDA headers and the libraries it
    links from that toolkit, not from the (empty) CUDA -dev stand-ins of the host environment."""
    exports = cudabuild["toolchain"].activations["cuda-nvcc_linux-64"]
    # the build folder: build/ (setup.py) or megabuild-build/ (the scikit-build-core front end)
    caches = [c for c in cudabuild["build"].output_dir.glob("**/CMakeCache.txt")
              if c.parent.name in ("build", "megabuild-build") and "CMAKE_CUDA_COMPILER:" in c.read_text()]
    assert caches, "no CMake cache with a CUDA compiler in the build folders"
    compiler = next(line.split("=", 1)[1] for line in caches[0].read_text().splitlines()
                    if line.startswith("CMAKE_CUDA_COMPILER:"))
    assert compiler == exports["CUDACXX"]
    toolkit = next(caches[0].parent.glob("CMakeFiles/*/CMakeCUDACompiler.cmake")).read_text()
    # CMake 4.x lists the toolkit's CCCL folder after its include folder (CUDA 13 moved CCCL there)
    include, *more = re.search(r'CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES "([^"]*)"', toolkit).group(1).split(";")
    assert include == f"{exports['CUDA_HOME']}/targets/x86_64-linux/include"
    assert all(path.startswith(include + "/") for path in more), more
    assert (Path(include) / "cuda_runtime.h").is_file()
    link_dirs = re.search(r'CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES "([^"]*)"', toolkit).group(1).split(";")
    assert f"{exports['CUDA_HOME']}/targets/x86_64-linux/lib" in link_dirs
    # cudart is linked statically (CMake's default): the kernel launch code is inside
    symbols = subprocess.run(["nm", cudabuild["prefixes"]["magma"] / "lib" / "libtorch_cuda.so"],
                             capture_output=True, text=True).stdout
    assert re.search(r"^\S+ [tT] cudaGetLastError$", symbols, re.MULTILINE), "no static cudart in libtorch_cuda"


def test_default_solve_is_magma_and_nomagma_can_be_asked_for(cudabuild):
    tag = "cuda" + cudabuild["cuda"].replace(".", "")
    for flavour in FLAVOURS:
        linalg = [r for r in cudabuild["records"][flavour] if r.name.normalized == "libtorch-cuda-linalg"]
        assert [str(r.build).split("_h")[0] for r in linalg] == [f"{tag}_{flavour}_generic"]
        gpu = [r for r in cudabuild["records"][flavour] if r.name.normalized == "pytorch-gpu"]
        assert len(gpu) == 1


@pytest.mark.parametrize("spec", ["pytorch-gpu", "libtorch"])
def test_cuda_build_needs_cuda(cudabuild, spec):
    """Without `__cuda` (CONDA_OVERRIDE_CUDA="" also hides a real driver) nothing solves:
    pytorch and libtorch of the CUDA build require it."""
    with pytest.raises(SolveError) as err:
        solve(cudabuild["channels"], [spec], cuda="")
    assert "__cuda" in str(err.value)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_import_torch_and_load_libtorch_cuda(cudabuild, flavour):
    """import torch, then libtorch_cuda through torch/lib (as PyTorch's __init__ loads its
    libraries): it resolves into $PREFIX/lib and loads without a GPU driver (cudart is static
    and looks for libcuda only when a CUDA call is made)."""
    prefix = cudabuild["prefixes"][flavour]
    out = _run_python(prefix, "import ctypes, pathlib, torch; assert torch.self_test() > 0; print(torch.__file__); "
                              "ctypes.CDLL(str(pathlib.Path(torch.__file__).parent / 'lib' / 'libtorch_cuda.so')); "
                              "print(open('/proc/self/maps').read())")
    assert out.splitlines()[0] == str(prefix / "lib" / f"python{PYTHON}" / "site-packages" / "torch" / "__init__.py")
    assert str(prefix / "lib" / "libtorch_cuda.so") in out


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cuda_linalg_flavour(cudabuild, flavour):
    """The test project's libtorch_cuda_linalg says which flavour it is (PyTorch's would link
    libmagma; the recipe's own test greps for that, which the test project cannot satisfy)."""
    prefix = cudabuild["prefixes"][flavour]
    library = prefix / "lib" / "libtorch_cuda_linalg.so"
    out = _run_python(prefix, f"import ctypes; lib = ctypes.CDLL({str(library)!r}); f = lib.megatest_linalg_backend; "
                              "f.restype = ctypes.c_char_p; print(f().decode()); "
                              "print(hasattr(lib, 'megatest_magma_queue_size'))")
    backend, has_magma_symbol = out.splitlines()
    assert backend == ("linalg backend: magma+cusolver" if flavour == "magma" else "linalg backend: cusolver only")
    assert has_magma_symbol == str(flavour == "magma")
    # the split: the library is libtorch-cuda-linalg's alone, libtorch_cuda is libtorch's
    owned = installed_files(prefix)
    assert owned["libtorch-cuda-linalg"] == ["lib/libtorch_cuda_linalg.so"]
    assert "lib/libtorch_cuda.so" in owned["libtorch"] and "lib/libtorch_cuda_linalg.so" not in owned["libtorch"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_installed_prefix_is_clean(cudabuild, flavour):
    prefix = cudabuild["prefixes"][flavour]
    assert files_in_two_packages(prefix) == {}
    bld = cudabuild["build"].output_dir / "bld"
    cuda_home = cudabuild["toolchain"].activations["cuda-nvcc_linux-64"]["CUDA_HOME"]
    needles = [str(bld), str(cudabuild["work"] / "source"), "host_env_placehold", cuda_home]
    assert leaked_paths(prefix, needles, OUR_PACKAGES) == []
    assert absolute_rpaths(prefix, OUR_PACKAGES) == []  # nor the machine's CUDA in a run path
    links = [p for p in (prefix / f"lib/python{PYTHON}/site-packages/torch/lib").iterdir() if p.is_symlink()]
    assert any(p.name == "libtorch_cuda.so" for p in links), "pytorch should link libtorch_cuda into $PREFIX/lib"
    assert escaping_symlinks(prefix, OUR_PACKAGES) == []
