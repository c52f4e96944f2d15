"""The megabuild driver on a real CMake project (tests/support/megabuild_project), every CPython here.

One session-scoped GPU-variant megabuild (split with the USE_MAGMA flip, libtorch and
libtorch-cuda-linalg per prefix, one pytorch step per Python) is built for real with gcc,
cmake, ninja (and nvcc when it works); the tests assert on what it left and on the compiler
invocations it made. A compiler launcher logs every compile.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support import megabuild_harness as harness
from megabuild.cache_seal import SEAL_PREFIX, seal
from megabuild.cmake_cache import CMakeCache
from megabuild.context import BuildContext
from megabuild.source_prep import prepare_source
from megabuild.activation import activation_scripts
from megabuild.errors import MegabuildError
from megabuild.python_target import PythonTarget
from megabuild.retarget import RECORD_KEYS, python_entry_keys, retarget_cache
from megabuild.staging import find_clobbers
from megabuild.hipify import run_hipify
from megabuild.steps import build_pytorch, install_cuda_linalg, install_libtorch, run_step
from megabuild.frontend import SetupPyFrontend

pytestmark = [pytest.mark.compile, pytest.mark.download]

PY_STEP_TARGETS = set(harness.PYTHON_TARGETS)


def _skip_unavailable(exc: harness.HarnessUnavailable) -> None:
    pytest.skip(str(exc))


@pytest.fixture(scope="session")
def venvs(cpythons: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    try:
        harness.check_tools()
        return harness.make_venvs(cpythons, tmp_path_factory.mktemp("megabuild-venvs"))
    except harness.HarnessUnavailable as exc:
        _skip_unavailable(exc)


@pytest.fixture(scope="session")
def gpu_build(venvs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    return harness.run_megabuild(venvs, tmp_path_factory.mktemp("megabuild-gpu"), gpu=True)


def by_target(objects: list[str]) -> Counter:
    return Counter(harness.target_of(o) for o in objects if not o.count("cmTC_"))


def site_packages(venv_python: Path) -> Path:
    return Path(PythonTarget.query(venv_python).platlib)


# -- compile counting ---------------------------------------------------------------------------
def test_core_objects_compile_exactly_once_across_all_pythons(gpu_build) -> None:
    counts = Counter(o for o in gpu_build.compiled() if harness.target_of(o) in harness.CORE_TARGETS)
    assert {harness.target_of(o) for o in counts} >= {"c10", "torch_cpu", "torch", "shm",
                                                       "torch_shm_manager", "torch_cuda"}
    assert len(counts) >= 14
    assert set(counts.values()) == {1}, {o: n for o, n in counts.items() if n != 1}
    assert all(harness.target_of(o) not in harness.CORE_TARGETS
               for phase, objs in gpu_build.phases.items() if phase != "split" for o in objs)


def test_each_python_step_recompiles_only_python_code(gpu_build) -> None:
    steps = [p for p in gpu_build.phases if p.startswith("pytorch:")]
    assert len(steps) == len(gpu_build.venvs) >= 2
    for phase in steps:
        targets = set(by_target(gpu_build.phases[phase]))
        assert targets == PY_STEP_TARGETS, (phase, targets)
    python_objects = Counter(o for o in gpu_build.compiled()
                             if harness.target_of(o) in PY_STEP_TARGETS)
    assert len(python_objects) == 3
    assert set(python_objects.values()) == {1 + len(steps)}  # split + once per Python


def test_magma_flip_recompiles_only_linalg(gpu_build) -> None:
    """What the driver does with the stand-in project, where USE_MAGMA reaches only the
    torch_cuda_linalg sources and an installed generated header. In real PyTorch that header
    (ATen/cuda/CUDAConfig.h) is also compiled into torch_cuda (CUDAHooks), so there the flip
    recompiles those few files as well; test_libtorch_stage_agrees_with_the_pristine_cache
    shows that libtorch is staged after the flip."""
    assert set(by_target(gpu_build.phases["magma"])) == {"torch_cuda_linalg"}
    linalg = Counter(o for o in gpu_build.compiled() if harness.target_of(o) == "torch_cuda_linalg")
    assert set(linalg.values()) == {2}  # nomagma in the split build, magma after the flip


def test_cuda_source_compiled_by_nvcc(gpu_build) -> None:
    cache = CMakeCache.read(gpu_build.src / "build" / "CMakeCache.txt")
    if cache.get("MEGATEST_HAVE_CUDA_KERNEL") != "ON":
        pytest.skip("CMake found no working CUDA compiler (nvcc), so Kernels.cu was not built")
    assert "CMakeFiles/torch_cuda.dir/cuda/Kernels.cu.o" in gpu_build.phases["split"]
    lib = (gpu_build.stage / "libtorch" / "lib" / "libtorch_cuda.so").read_bytes()
    assert b"megatest_scale" in lib
    assert cache.get("TORCH_CUDA_ARCH_LIST") == "8.0"  # FEEDSTOCK_CUDA_ARCH_LIST
    ninja = (gpu_build.src / "build" / "build.ninja").read_text()
    assert "compute_80" in ninja or "sm_80" in ninja


# -- staged outputs -----------------------------------------------------------------------------
def test_libtorch_stage_has_cpp_files_only(gpu_build) -> None:
    stage = gpu_build.stage / "libtorch"
    libs = sorted(p.name for p in (stage / "lib").iterdir())
    assert libs == ["libc10.so", "libshm.so", "libtorch.so", "libtorch_cpu.so",
                    "libtorch_cuda.so"]
    assert (stage / "bin" / "torch_shm_manager").is_file()
    assert (stage / "include" / "c10" / "Core.h").is_file()
    assert (stage / "include" / "torch" / "torch_version.h").is_file()
    assert (stage / "share" / "cmake" / "Torch" / "TorchConfig.cmake").is_file()


def test_magma_and_nomagma_libraries_differ(gpu_build) -> None:
    magma = gpu_build.stage / "cuda-linalg" / "magma" / "lib" / "libtorch_cuda_linalg.so"
    nomagma = gpu_build.stage / "cuda-linalg" / "nomagma" / "lib" / "libtorch_cuda_linalg.so"
    assert magma.read_bytes() != nomagma.read_bytes()
    assert b"magma+cusolver" in magma.read_bytes()
    assert b"cusolver only" in nomagma.read_bytes()
    assert b"megatest_magma_queue_size" not in nomagma.read_bytes()


def test_libtorch_stage_agrees_with_the_pristine_cache(gpu_build) -> None:
    """libtorch ships the generated header that records USE_MAGMA; it must come from the build
    after the MAGMA flip, the one the pristine cache (and so every pytorch step) describes."""
    header = gpu_build.stage / "libtorch" / "include" / "ATen" / "cuda" / "CUDAConfig.h"
    pristine = CMakeCache.read(gpu_build.stage / "CMakeCache.pristine.txt")
    assert pristine.get("USE_MAGMA") == "ON"
    assert "#define AT_MAGMA_ENABLED() 1" in header.read_text()
    # and the pytorch steps, which rebuild from that cache, install the same header
    for python in gpu_build.venvs.values():
        installed = Path(PythonTarget.query(python).platlib) / "torch" / "include" / "ATen" / "cuda"
        assert (installed / "CUDAConfig.h").read_text() == header.read_text()


def test_pristine_cache_is_the_split_python_with_magma(gpu_build) -> None:
    pristine = CMakeCache.read(gpu_build.stage / "CMakeCache.pristine.txt")
    assert pristine.get("Python_EXECUTABLE") == str(gpu_build.venvs[gpu_build.split_version])
    assert pristine.get("USE_MAGMA") == "ON"


# -- installed pytorch per Python ---------------------------------------------------------------
def test_extension_has_its_pythons_soabi_and_imports(gpu_build, tmp_path: Path) -> None:
    for version, python in gpu_build.venvs.items():
        target = PythonTarget.query(python)
        torch_dir = Path(target.platlib) / "torch"
        assert sorted(p.name for p in torch_dir.glob("_C*.so")) == [f"_C{target.ext_suffix}"]
        assert f"cpython-{version.replace('.', '')}" in target.ext_suffix
        proc = subprocess.run([str(python), "-c", "import torch; print(torch.compiled_for()); "
                               "print(torch.self_test()); print(torch.__file__)"],
                              capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        compiled_for, result, module = proc.stdout.split()
        assert compiled_for == target.version
        assert float(result) > 0
        assert Path(module).parent == torch_dir


def test_prefix_files_are_symlinks_that_resolve(gpu_build) -> None:
    for version, python in gpu_build.venvs.items():
        prefix = gpu_build.prefixes[version].resolve()
        torch_dir = site_packages(python) / "torch"
        files = [p for sub in ("bin", "lib", "include", "share")
                 for p in (torch_dir / sub).rglob("*") if not p.is_dir()]
        assert len(files) >= 10
        for path in files:
            assert path.is_symlink(), path
            assert path.exists(), f"{path} -> {os.readlink(path)} does not resolve"
            assert prefix in path.resolve().parents, path
        assert not (prefix / "lib" / "libtorch_python.so").is_symlink()
        assert (prefix / "lib" / "libtorch_python.so").is_file()
        linalg = (torch_dir / "lib" / "libtorch_cuda_linalg.so").read_bytes()
        assert (b"magma+cusolver" in linalg) == (
            b"magma+cusolver" in (prefix / "lib" / "libtorch_cuda_linalg.so").read_bytes())


def test_executable_runs_from_prefix(gpu_build) -> None:
    for version in gpu_build.venvs:
        exe = gpu_build.prefixes[version] / "bin" / "torch_shm_manager"
        proc = subprocess.run([str(exe)], capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stdout.strip() == "torch/shm_manager"


def test_no_pyc_of_another_python(gpu_build) -> None:
    for version, python in gpu_build.venvs.items():
        tag = f"cpython-{version.replace('.', '')}"
        sp = site_packages(python)
        pycs = [p for top in ("torch", "torchgen") for p in (sp / top).rglob("*.pyc")]
        assert pycs and all(p.name.split(".")[1] == tag for p in pycs), pycs
        # the wheel was built from a tree that did hold foreign .pyc: the clean-up mattered
        built = next((gpu_build.src / "build").glob(f"lib.*-{tag}"))
        shipped = {p.name.split(".")[1] for p in built.rglob("*.pyc")}
        assert shipped - {tag}, f"expected foreign .pyc in {built}, found {shipped}"


# -- the cache on a real machine -----------------------------------------------------------------
def test_pristine_describes_the_interpreter_as_sysconfig_does(gpu_build) -> None:
    pristine = CMakeCache.read(gpu_build.stage / "CMakeCache.pristine.txt")
    from_cache = PythonTarget.from_cmake_cache(pristine)
    queried = PythonTarget.query(gpu_build.venvs[gpu_build.split_version])
    # the driver's query asks what the CMake in use asks (sysconfig), field for field
    for name in ("executable", "version", "abiflags", "soabi", "ext_suffix", "include_dir",
                 "stdlib", "platstdlib", "purelib", "platlib", "pointer_bits", "sosabi"):
        assert getattr(from_cache, name) == getattr(queried, name), name


def test_retargeted_cache_equals_a_fresh_configure(gpu_build, tmp_path: Path) -> None:
    """Retargeting the pristine cache gives the Python entries CMake writes for that Python."""
    others = [v for v in gpu_build.venvs if v != gpu_build.split_version]
    version = others[0]
    python = gpu_build.venvs[version]
    src = harness.copy_project(tmp_path / "src")
    prepare_source(src)  # as the split step does before its configure
    env = {k: v for k, v in gpu_build.base.items() if not k.startswith("CMAKE_")}
    env.update({"USE_CUDA": "1", "FEEDSTOCK_CUDA_ARCH_LIST": "8.0", "TORCH_CUDA_ARCH_LIST": "8.0"})
    subprocess.run([str(python), "setup.py", "--cmake-only"], cwd=src, env=env, check=True,
                   capture_output=True)
    fresh = CMakeCache.read(src / "build" / "CMakeCache.txt")
    pristine = CMakeCache.read(gpu_build.stage / "CMakeCache.pristine.txt")
    target = PythonTarget.query(python)
    keys = python_entry_keys(pristine, PythonTarget.from_cmake_cache(pristine), target)
    retarget_cache(pristine, target)
    checked = [k for k in keys if k in fresh and k != "CMAKE_PREFIX_PATH" and k not in RECORD_KEYS]
    assert {"Python_EXECUTABLE", "_Python_INCLUDE_DIR", "PYTHON_MODULE_EXTENSION",
            "FIND_PACKAGE_MESSAGE_DETAILS_Python"} <= set(checked)
    for key in checked:
        assert pristine.get(key) == fresh.get(key), key
    # FindPython's record is left for CMake to write, in its own spelling
    assert not [key for key in RECORD_KEYS if key in pristine]
    # setup.py prepends the interpreter's site-packages to CMAKE_PREFIX_PATH
    assert pristine.get("CMAKE_PREFIX_PATH") == fresh.get("CMAKE_PREFIX_PATH")


def test_retarget_keeps_the_requested_minimum_version(gpu_build) -> None:
    """find_package(Python 3.10 ...) puts "(3.10)" in the message entry; a cache configured
    with 3.10 must still retarget to another Python (the minimum is not a trace of 3.10).
    Every retarget starts from the pristine copy, as the pytorch steps do."""
    pristine = gpu_build.stage / "CMakeCache.pristine.txt"
    assert "(3.10)]" in CMakeCache.read(pristine).get("FIND_PACKAGE_MESSAGE_DETAILS_Python")
    for target in [PythonTarget.query(p) for p in gpu_build.venvs.values()]:
        cache = CMakeCache.read(pristine)
        retarget_cache(cache, target)
        message = cache.get("FIND_PACKAGE_MESSAGE_DETAILS_Python")
        assert message.endswith(f"[v{target.version}(3.10)]")
        assert cache.get("Python_EXECUTABLE") == target.executable


def test_unrelated_entry_with_3_12_survives_every_step(gpu_build) -> None:
    build_cache = CMakeCache.read(gpu_build.src / "build" / "CMakeCache.txt")
    last = sorted(gpu_build.venvs, key=lambda v: tuple(map(int, v.split("."))))[-1]
    assert build_cache.get("Python_EXECUTABLE") == str(gpu_build.venvs[last])
    assert build_cache.get("MEGATEST_PROTOBUF_MIN_VERSION") == "3.12.4"


# -- preconditions and bad input ----------------------------------------------------------------
@pytest.fixture
def broken_setup(gpu_build, tmp_path: Path):
    """A source tree with a build cache and a stage holding a copy of the real pristine cache."""
    src = tmp_path / "src"
    (src / "build").mkdir(parents=True)
    sentinel = b"# This is the CMakeCache file.\nSENTINEL:STRING=untouched\n"
    (src / "build" / "CMakeCache.txt").write_bytes(sentinel)
    stage = tmp_path / "stage"
    stage.mkdir()
    # the real pristine cache, as the split of this tree would have saved it
    copied = CMakeCache.read(gpu_build.stage / "CMakeCache.pristine.txt")
    copied.set("CMAKE_HOME_DIRECTORY", str(src))
    edited = copied.to_bytes()
    pristine = seal(edited[:edited.rindex(SEAL_PREFIX)])   # sealed again, as the split seals what it saves
    version = next(iter(gpu_build.venvs))

    def context(pkg_name: str = "pytorch", python: Path | None = None, **variant: str):
        return BuildContext.create(src, tmp_path / "prefix", python or gpu_build.venvs[version],
                                   {**gpu_build.variant, "PKG_NAME": pkg_name, **variant},
                                   gpu_build.base, stage)
    return src, stage, pristine, sentinel, context


@pytest.mark.parametrize("damage, message", [
    # the seal is checked first, so which entries a cut keeps (it depends on the paths' lengths)
    # never decides the message
    (lambda d: d[: len(d) * 2 // 3], "CMakeCache.pristine.txt is truncated"),
    (lambda d: d.replace(b"USE_MAGMA:BOOL=ON", b"USE_MAGMA:BOOL\x00ON"), "CMakeCache.pristine.txt is damaged"),
    (lambda d: d.replace(b"USE_MAGMA:BOOL=ON", b"USE_MAGMA BOOL ON"), "CMakeCache.pristine.txt is damaged"),
    (lambda d: b"".join(l for l in d.splitlines(True) if not l.startswith(b"_Python_INCLUDE_DIR:")),
     "CMakeCache.pristine.txt is damaged"),
])
def test_bad_pristine_cache_is_a_clear_error_and_stays_untouched(broken_setup, damage, message):
    src, stage, pristine, sentinel, context = broken_setup
    damaged = damage(pristine)
    (stage / "CMakeCache.pristine.txt").write_bytes(damaged)
    with pytest.raises(MegabuildError, match=message) as info:
        build_pytorch(context(), SetupPyFrontend())
    assert "\n" not in str(info.value)
    assert (stage / "CMakeCache.pristine.txt").read_bytes() == damaged
    assert (src / "build" / "CMakeCache.txt").read_bytes() == sentinel
    assert sorted(p.name for p in (src / "build").iterdir()) == ["CMakeCache.txt"]


def test_unknown_cuda_version_stops_before_anything(gpu_build, broken_setup) -> None:
    src, stage, pristine, sentinel, context = broken_setup
    (stage / "CMakeCache.pristine.txt").write_bytes(pristine)
    base = {k: v for k, v in gpu_build.base.items() if k != "FEEDSTOCK_CUDA_ARCH_LIST"}
    with pytest.raises(MegabuildError, match="unknown CUDA version '10.2'"):
        BuildContext.create(src, src / "prefix", gpu_build.venvs[gpu_build.split_version],
                            {**gpu_build.variant, "PKG_NAME": "pytorch",
                             "cuda_compiler_version": "10.2"}, base, stage)
    assert (stage / "CMakeCache.pristine.txt").read_bytes() == pristine
    assert (src / "build" / "CMakeCache.txt").read_bytes() == sentinel


def test_missing_preconditions(broken_setup, tmp_path: Path) -> None:
    src, stage, pristine, sentinel, context = broken_setup
    with pytest.raises(MegabuildError, match="no pristine cache .* run the libtorch-split step"):
        build_pytorch(context(), SetupPyFrontend())
    with pytest.raises(MegabuildError, match="no staged files .*libtorch"):
        install_libtorch(context("libtorch"))
    with pytest.raises(MegabuildError, match="no staged files .*magma"):
        install_cuda_linalg(context("libtorch-cuda-linalg"))
    (stage / "CMakeCache.pristine.txt").write_bytes(pristine)
    with pytest.raises(MegabuildError, match="interpreter .*python3.99 not found"):
        build_pytorch(context(python=tmp_path / "bin" / "python3.99"), SetupPyFrontend())
    with pytest.raises(MegabuildError, match="PKG_NAME='pytorch-cpu' has no megabuild step"):
        run_step(context("pytorch-cpu"))
    assert (src / "build" / "CMakeCache.txt").read_bytes() == sentinel


class CapturingFrontend(SetupPyFrontend):
    """Stops at install(), keeping the cache the step handed to the build."""

    class Stop(Exception):
        pass

    def install(self, ctx: BuildContext) -> None:
        self.cache = (self.build_dir(ctx) / "CMakeCache.txt").read_bytes()
        raise self.Stop


def test_pytorch_step_patches_the_pristine_copy(gpu_build, broken_setup) -> None:
    src, stage, pristine, sentinel, context = broken_setup
    (stage / "CMakeCache.pristine.txt").write_bytes(pristine)
    frontend = CapturingFrontend()
    version = next(iter(gpu_build.venvs))
    with pytest.raises(CapturingFrontend.Stop):
        build_pytorch(context(), frontend)
    assert (stage / "CMakeCache.pristine.txt").read_bytes() == pristine
    written = CMakeCache.parse(frontend.cache)
    assert "SENTINEL" not in written  # built from the pristine copy, not the build dir's cache
    assert written.get("Python_EXECUTABLE") == str(gpu_build.venvs[version])
    before = CMakeCache.parse(pristine)
    changed = {e.key for e in written if before.get(e.key) != e.value}
    target = PythonTarget.query(gpu_build.venvs[version])
    assert changed and changed <= set(python_entry_keys(
        before, PythonTarget.from_cmake_cache(before), target))
    assert {e.key for e in before} - {e.key for e in written} == set(RECORD_KEYS)


def test_hipify_runs_once_and_needs_the_script(broken_setup) -> None:
    src, stage, pristine, sentinel, context = broken_setup
    ctx = context("libtorch-split", rocm_version="6.4", cuda_compiler_version="None")
    with pytest.raises(MegabuildError, match="build_amd.py is missing"):
        run_hipify(ctx)
    script = src / "tools" / "amd_build" / "build_amd.py"
    script.parent.mkdir(parents=True)
    script.write_text("open('hipify-runs.txt', 'a').write('ran\\n')\n")
    run_hipify(ctx)
    run_hipify(ctx)
    assert (src / "hipify-runs.txt").read_text() == "ran\n"


def test_command_line_prints_one_error_line(broken_setup, tmp_path: Path) -> None:
    src, stage, pristine, sentinel, context = broken_setup
    recipe = Path(harness.REPO_ROOT) / "recipe"
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(recipe)}
    proc = subprocess.run([sys.executable, "-m", "megabuild"], env=env, capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: SRC_DIR, PREFIX, PYTHON, PKG_NAME not set; run the driver through conda-build "
        "(recipe/build.sh) or export them yourself"]
    env.update({"SRC_DIR": str(src), "PREFIX": str(tmp_path / "prefix"),
                "PYTHON": sys.executable, "PKG_NAME": "pytorch",
                "MEGABUILD_STAGE_DIR": str(stage), "cuda_compiler_version": "None"})
    proc = subprocess.run([sys.executable, "-m", "megabuild"], env=env, capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if not line.startswith("[megabuild]")]
    assert len(errors) == 1 and errors[0].startswith("error: no pristine cache"), lines


# -- CPU variant ---------------------------------------------------------------------------------
def test_cuda_libtorch_installs_its_arch_list_activation(gpu_build) -> None:
    for prefix in gpu_build.prefixes.values():
        script = (prefix / "etc" / "conda" / "activate.d" / "libtorch_activate.sh").read_text()
        assert "export TORCH_CUDA_ARCH_LIST=" in script
        assert (prefix / "etc" / "conda" / "deactivate.d" / "libtorch_deactivate.sh").is_file()


def test_package_version_has_no_post_suffix(gpu_build) -> None:
    """The test project's setup.py follows PyTorch's rule (.post<N> for a build number above
    1); the recipe's conda build number must not reach it."""
    for version, venv_python in gpu_build.venvs.items():
        out = subprocess.run([str(venv_python), "-c", "import importlib.metadata as m; "
                              "print(m.version('megatorch'))"], capture_output=True, text=True)
        assert out.stdout.strip() == "2.13.0", (version, out.stdout, out.stderr)


def test_cpu_variant_has_no_cuda_outputs(venvs, cpythons, tmp_path_factory) -> None:
    # venvs of its own: the pytorch steps install into them, and the session's venvs must
    # keep what gpu_build installed (other tests inspect their site-packages)
    work = tmp_path_factory.mktemp("megabuild-cpu")
    versions = list(venvs)[:2]
    wheelhouse = harness.fetch_setuptools(venvs[versions[0]].parents[2] / "wheelhouse")
    two = {v: harness.make_venv(cpythons[v], work / f"venv-{v}", wheelhouse) for v in versions}
    run = harness.run_megabuild(two, work / "build", gpu=False)
    assert "magma" not in run.phases
    assert not (run.stage / "cuda-linalg").exists()
    assert sorted(p.name for p in (run.stage / "libtorch" / "lib").iterdir()) == [
        "libc10.so", "libshm.so", "libtorch.so", "libtorch_cpu.so"]
    core = Counter(o for o in run.compiled() if harness.target_of(o) in harness.CORE_TARGETS)
    assert core and set(core.values()) == {1}
    assert CMakeCache.read(run.src / "build" / "CMakeCache.txt").get("USE_CUDA") in ("0", "OFF")
    # no CUDA, no TORCH_CUDA_ARCH_LIST activation script
    assert not (run.prefixes[versions[0]] / "etc" / "conda").exists()
    # the release tarball's preparation ran before the configure
    assert not (run.src / ".gitmodules").exists()


def test_split_refuses_a_magma_flip_that_changed_nothing(venvs, tmp_path: Path) -> None:
    """A linalg source that ignores USE_MAGMA: the split step must stop, not stage twins."""
    version = next(iter(venvs))
    src = harness.copy_project(tmp_path / "src")
    (src / "linalg" / "BatchLinearAlgebraLib.cpp").write_text(
        'extern "C" const char* megatest_linalg_backend() { return "same either way"; }\n')
    log_file = tmp_path / "compiles.log"
    base = harness.base_environ(harness.write_launcher(tmp_path / "launch.sh", log_file),
                                core_units=1, core_weight=1)
    variant = {"cuda_compiler_version": "13.0", "blas_impl": "generic", "CPU_COUNT": "2",
               "target_platform": "linux-64", "PKG_NAME": "libtorch-split"}
    ctx = BuildContext.create(src, tmp_path / "prefix", venvs[version], variant, base)
    with pytest.raises(MegabuildError, match="did not change after setting USE_MAGMA=ON") as info:
        run_step(ctx)
    assert "MAGMA was found" not in str(info.value)  # the configure kept USE_MAGMA on: not the cause
    assert not (ctx.stage_dir / "CMakeCache.pristine.txt").exists()
    # no magma stage is left to install, and the step that would install one refuses
    assert not (ctx.stage_dir / "cuda-linalg" / "magma").exists()
    prefix = tmp_path / "linalg-prefix"
    install = BuildContext.create(src, prefix, venvs[version], {**variant, "PKG_NAME": "libtorch-cuda-linalg",
                                                                "use_magma": "true"}, base)
    with pytest.raises(MegabuildError, match="no staged files .*magma"):
        run_step(install)
    assert not prefix.exists()


def test_a_linalg_stage_whose_library_is_not_its_flavour_is_refused(gpu_build, tmp_path: Path) -> None:
    """The split records each linalg stage's flavour and bytes; the install step refuses a
    stage that no longer matches its record, or whose library is the other flavour's."""
    stage = tmp_path / "stage"
    shutil.copytree(gpu_build.stage / "cuda-linalg", stage / "cuda-linalg")
    shutil.copy2(gpu_build.stage / "CMakeCache.pristine.txt", stage)
    magma_lib = stage / "cuda-linalg" / "magma" / "lib" / "libtorch_cuda_linalg.so"
    nomagma_lib = stage / "cuda-linalg" / "nomagma" / "lib" / "libtorch_cuda_linalg.so"
    prefix = tmp_path / "prefix"

    def install(flavour: str) -> None:
        run_step(BuildContext.create(gpu_build.src, prefix, gpu_build.venvs[gpu_build.split_version],
                                     {**gpu_build.variant, "PKG_NAME": "libtorch-cuda-linalg",
                                      "use_magma": "true" if flavour == "magma" else "false"},
                                     gpu_build.base, stage))

    record = stage / "cuda-linalg" / "magma.json"
    assert json.loads(record.read_text())["flavour"] == "magma"
    # the nomagma library under the magma name (what a failed split used to leave)
    shutil.copy2(nomagma_lib, magma_lib)
    with pytest.raises(MegabuildError, match=r"^the files in .*magma are not the ones the split staged"):
        install("magma")
    # ... even with a record made to fit it
    data = json.loads(record.read_text())
    data["files"] = json.loads((stage / "cuda-linalg" / "nomagma.json").read_text())["files"]
    record.write_text(json.dumps(data))
    with pytest.raises(MegabuildError, match=r"holds the same library as the nomagma stage, so it is not a magma build"):
        install("magma")
    # a stage without its record (a split that stopped before it knew the flavour)
    record.unlink()
    with pytest.raises(MegabuildError, match=r"has no record of its MAGMA flavour .*run the libtorch-split step again"):
        install("magma")
    assert not prefix.exists()
    install("nomagma")  # the untouched flavour still installs
    assert (prefix / "lib" / "libtorch_cuda_linalg.so").read_bytes() == nomagma_lib.read_bytes()


# -- installing into a prefix that holds host dependencies -----------------------------------------
def tree_state(root: Path) -> dict[str, bytes | str]:
    """Every file (its bytes) and symlink (its target) under root, by relative path."""
    return {p.relative_to(root).as_posix(): os.readlink(p) if p.is_symlink() else p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_symlink() or p.is_file()}


def host_prefix(path: Path) -> Path:
    """A prefix as conda-build leaves it for the libtorch output: host dependencies installed."""
    (path / "include" / "pybind11").mkdir(parents=True)
    (path / "include" / "pybind11" / "pybind11.h").write_text("// pybind11 from the channel\n")
    (path / "lib").mkdir()
    (path / "lib" / "libprotobuf.so.29").write_bytes(b"\x7fELF protobuf from the channel\n")
    os.symlink("libprotobuf.so.29", path / "lib" / "libprotobuf.so")
    return path


def test_install_refuses_to_clobber_a_host_dependency(gpu_build, tmp_path: Path) -> None:
    stage = gpu_build.stage / "libtorch"
    prefix = host_prefix(tmp_path / "prefix")
    # a host package ships a header and a CMake file at the paths the build staged
    (prefix / "include" / "c10").mkdir()
    (prefix / "include" / "c10" / "Core.h").write_text("// c10 from another package\n")
    config = prefix / "share" / "cmake" / "Torch" / "TorchConfig.cmake"
    config.parent.mkdir(parents=True)
    config.write_text("# another package's Torch config\n")
    # an identical copy of a staged file is not a collision
    (prefix / "lib" / "libc10.so").write_bytes((stage / "lib" / "libc10.so").read_bytes())
    before = tree_state(prefix)
    ctx = gpu_build.context(gpu_build.split_version, "libtorch", prefix=prefix)
    with pytest.raises(MegabuildError) as info:
        install_libtorch(ctx)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"2 staged file(s) would overwrite different files already in "
                              f"{prefix} (first: include/c10/Core.h)")
    assert "USE_SYSTEM_*" in message and "BUILD_CUSTOM_PROTOBUF" in message
    assert tree_state(prefix) == before  # checked first: nothing was copied

    # without the foreign files the install goes through, and running it again is fine
    (prefix / "include" / "c10" / "Core.h").unlink()
    config.unlink()
    host = tree_state(prefix)
    install_libtorch(ctx)
    installed = tree_state(prefix)
    # host files kept, staged files added, and (CUDA) the TORCH_CUDA_ARCH_LIST activation
    activation = {str(path): text.encode() for path, text in
                  activation_scripts(ctx.env["TORCH_CUDA_ARCH_LIST"]).items()}
    assert installed == {**host, **tree_state(stage), **activation}
    install_libtorch(ctx)
    assert tree_state(prefix) == installed


def test_linalg_flavours_do_not_overwrite_each_other(gpu_build, tmp_path: Path) -> None:
    """magma and nomagma are separate packages; installing one over the other is a clobber."""
    prefix = host_prefix(tmp_path / "prefix")
    magma = gpu_build.context(gpu_build.split_version, "libtorch-cuda-linalg", prefix=prefix,
                              use_magma="true")
    install_cuda_linalg(magma)
    installed = tree_state(prefix)
    assert b"magma+cusolver" in installed["lib/libtorch_cuda_linalg.so"]
    with pytest.raises(MegabuildError, match=r"^1 staged file\(s\) would overwrite .*"
                                             r"\(first: lib/libtorch_cuda_linalg\.so\)"):
        install_cuda_linalg(gpu_build.context(gpu_build.split_version, "libtorch-cuda-linalg",
                                              prefix=prefix, use_magma="false"))
    assert tree_state(prefix) == installed
    install_cuda_linalg(magma)
    assert tree_state(prefix) == installed


def test_find_clobbers_compares_links_folders_and_parents(tmp_path: Path) -> None:
    stage, prefix = tmp_path / "stage", host_prefix(tmp_path / "prefix")
    (stage / "lib").mkdir(parents=True)
    (stage / "lib" / "libprotobuf.so.29").write_bytes(b"\x7fELF protobuf from the channel\n")
    os.symlink("libprotobuf.so.29", stage / "lib" / "libprotobuf.so")  # same link: fine
    os.symlink("libfoo.so.1", stage / "lib" / "libfoo.so")
    os.symlink("libfoo.so.2", prefix / "lib" / "libfoo.so")  # other target: clobber
    (stage / "lib" / "libbar.so").write_bytes(b"bar")
    os.symlink("libbar.so.9", prefix / "lib" / "libbar.so")  # a link where a file goes: clobber
    (stage / "include" / "pybind11").mkdir(parents=True)
    (stage / "include" / "pybind11" / "pybind11.h").write_text("// pybind11 from the channel\n")
    (stage / "include" / "pybind11" / "detail.h").write_text("// new file: fine\n")
    (stage / "share" / "doc").mkdir(parents=True)
    (stage / "share" / "doc" / "README").write_text("staged\n")
    (prefix / "share").mkdir()
    (prefix / "share" / "doc").write_text("a file where the staged folder goes\n")
    (stage / "bin").mkdir()
    (stage / "bin" / "tool").write_text("staged\n")
    (prefix / "bin" / "tool").mkdir(parents=True)  # a folder where a file goes
    assert [p.as_posix() for p in find_clobbers(stage, prefix)] == [
        "bin/tool", "lib/libbar.so", "lib/libfoo.so", "share/doc/README"]


# -- megabuild=false: a fresh configure per Python ------------------------------------------------
def test_megabuild_false_configures_afresh_for_another_python(
        venvs, cpythons, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The split with one Python, then the pytorch step with megabuild=false for another one
    (a venv of its own, so the session's venvs stay as gpu_build left them)."""
    split_version = "3.12" if "3.12" in venvs else sorted(venvs)[-1]
    version = next(v for v in sorted(venvs) if v != split_version)
    wheelhouse = harness.fetch_setuptools(venvs[version].parents[2] / "wheelhouse")
    python = harness.make_venv(cpythons[version], tmp_path / "venv", wheelhouse)
    src = harness.copy_project(tmp_path / "src")
    base = harness.base_environ(harness.write_launcher(tmp_path / "launch.sh",
                                                       tmp_path / "compiles.log"),
                                core_units=1, core_weight=1)
    variant = {"cuda_compiler_version": "None", "blas_impl": "generic", "CPU_COUNT": "2",
               "target_platform": "linux-64", "megabuild": "false"}
    prefix = tmp_path / "prefix"

    def context(pkg_name: str, step_python: Path, **extra_env: str) -> BuildContext:
        return BuildContext.create(src, prefix, step_python, {**variant, "PKG_NAME": pkg_name},
                                   {**base, **extra_env})

    run_step(context("libtorch-split", venvs[split_version]))
    run_step(context("libtorch", venvs[split_version]))
    pristine_path = src / "megabuild-stage" / "CMakeCache.pristine.txt"
    pristine = pristine_path.read_bytes()
    capsys.readouterr()
    # a -D the front end passes only when it configures: proof that CMake configured again
    run_step(context("pytorch", python, MEGATEST_CONFIGURED_FOR=version))
    log_lines = capsys.readouterr().err.splitlines()

    assert pristine_path.read_bytes() == pristine
    assert any("(megabuild=false): fresh CMake configure" in line for line in log_lines)
    assert any(line.endswith(f"configures again against {python}") for line in log_lines)
    # neither the retarget step nor its "  KEY: old -> new" lines
    assert not [line for line in log_lines
                if "megabuild=true" in line or line.startswith("[megabuild]   ")], log_lines
    cache = CMakeCache.read(src / "build" / "CMakeCache.txt")
    target = PythonTarget.query(python)
    assert cache.get("MEGATEST_CONFIGURED_FOR") == version
    assert cache.get("Python_EXECUTABLE") == str(python)
    assert PythonTarget.from_cmake_cache(cache).platlib == target.platlib
    assert cache.get("PYTHON_MODULE_EXTENSION") == target.ext_suffix
    split_root = str(venvs[split_version].parents[1])
    assert split_root not in (src / "build" / "CMakeCache.txt").read_text()
    compiles = (tmp_path / "compiles.log").read_text().splitlines()
    # CMake's compiler checks ran twice: in the split configure and in the fresh one
    assert sum("CMakeCXXCompilerABI" in line for line in compiles) == 2, compiles

    torch_dir = Path(target.platlib) / "torch"
    assert sorted(p.name for p in torch_dir.glob("_C*.so")) == [f"_C{target.ext_suffix}"]
    proc = subprocess.run([str(python), "-c", "import torch; print(torch.compiled_for()); "
                           "print(torch.self_test())"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == target.version and float(proc.stdout.split()[1]) > 0
    files = [p for sub in ("bin", "lib", "include", "share")
             for p in (torch_dir / sub).rglob("*") if not p.is_dir()]
    assert len(files) >= 8
    for path in files:
        assert path.is_symlink() and path.exists(), path
        assert prefix.resolve() in path.resolve().parents, path
    assert (prefix / "lib" / "libtorch_python.so").is_file()
    assert not (prefix / "lib" / "libtorch_python.so").is_symlink()
    pycs = [p for top in ("torch", "torchgen") for p in (Path(target.platlib) / top).rglob("*.pyc")]
    assert pycs and {p.name.split(".")[1] for p in pycs} == {target.pyc_tag}


@pytest.mark.parametrize("value", ["ture", "", None])
def test_unknown_use_magma_value_installs_nothing(gpu_build, tmp_path: Path, value) -> None:
    """A typo must not silently install the nomagma library into the magma package."""
    variant = {**gpu_build.variant, "PKG_NAME": "libtorch-cuda-linalg"}
    variant.pop("use_magma")
    if value is not None:
        variant["use_magma"] = value
    prefix = tmp_path / "prefix"
    ctx = BuildContext.create(gpu_build.src, prefix, gpu_build.venvs[gpu_build.split_version],
                              variant, gpu_build.base, gpu_build.stage)
    with pytest.raises(MegabuildError, match=r"^use_magma=.* is not a variant value.*true or "
                                             r"false") as info:
        run_step(ctx)
    assert "\n" not in str(info.value)
    assert not prefix.exists()


def test_unknown_megabuild_value_is_one_line(broken_setup) -> None:
    src, stage, pristine, sentinel, context = broken_setup
    with pytest.raises(MegabuildError, match=r"^megabuild='sometimes' is not a variant value.*"
                                             r"set it to true or false"):
        build_pytorch(context(megabuild="sometimes"), SetupPyFrontend())
    assert (src / "build" / "CMakeCache.txt").read_bytes() == sentinel
