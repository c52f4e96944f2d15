"""The megabuild driver on a real CMake project (tests/megabuild_project), every CPython here.

One session-scoped GPU-variant megabuild (split with the USE_MAGMA flip, libtorch and
libtorch-cuda-linalg per prefix, one pytorch step per Python) is built for real with gcc,
cmake, ninja (and nvcc when it works); the tests assert on what it left and on the compiler
invocations it made. A compiler launcher logs every compile.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import megabuild_harness as harness
from megabuild.cmake_cache import CMakeCache
from megabuild.context import BuildContext
from megabuild.errors import MegabuildError
from megabuild.python_target import PythonTarget
from megabuild.retarget import python_entry_keys, retarget_cache
from megabuild.steps import (build_pytorch, install_cuda_linalg, install_libtorch, run_hipify,
                             run_step)
from megabuild.frontend import SetupPyFrontend

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
    for name in ("executable", "version", "soabi", "ext_suffix", "include_dir", "stdlib",
                 "platstdlib", "purelib", "platlib"):
        assert getattr(from_cache, name) == getattr(queried, name), name
    assert queried.interpreter_properties() == pristine.get("_Python_INTERPRETER_PROPERTIES")


def test_retargeted_cache_equals_a_fresh_configure(gpu_build, tmp_path: Path) -> None:
    """Retargeting the pristine cache gives the Python entries CMake writes for that Python."""
    others = [v for v in gpu_build.venvs if v != gpu_build.split_version]
    version = others[0]
    python = gpu_build.venvs[version]
    src = harness.copy_project(tmp_path / "src")
    env = {k: v for k, v in gpu_build.base.items() if not k.startswith("CMAKE_")}
    env.update({"USE_CUDA": "1", "FEEDSTOCK_CUDA_ARCH_LIST": "8.0", "TORCH_CUDA_ARCH_LIST": "8.0"})
    subprocess.run([str(python), "setup.py", "--cmake-only"], cwd=src, env=env, check=True,
                   capture_output=True)
    fresh = CMakeCache.read(src / "build" / "CMakeCache.txt")
    pristine = CMakeCache.read(gpu_build.stage / "CMakeCache.pristine.txt")
    target = PythonTarget.query(python)
    keys = python_entry_keys(pristine, PythonTarget.from_cmake_cache(pristine), target)
    retarget_cache(pristine, target)
    checked = [k for k in keys if k in fresh and k != "CMAKE_PREFIX_PATH"]
    assert {"Python_EXECUTABLE", "_Python_EXECUTABLE", "_Python_INCLUDE_DIR",
            "_Python_INTERPRETER_PROPERTIES", "PYTHON_MODULE_EXTENSION",
            "FIND_PACKAGE_MESSAGE_DETAILS_Python"} <= set(checked)
    for key in checked:
        assert pristine.get(key) == fresh.get(key), key
    # setup.py prepends the interpreter's site-packages to CMAKE_PREFIX_PATH
    assert pristine.get("CMAKE_PREFIX_PATH") == fresh.get("CMAKE_PREFIX_PATH")


def test_retarget_chain_keeps_the_requested_minimum_version(gpu_build) -> None:
    """find_package(Python 3.10 ...) puts "(3.10)" in the message entry; a cache configured
    with 3.10 must still retarget to another Python (the minimum is not a trace of 3.10)."""
    cache = CMakeCache.read(gpu_build.stage / "CMakeCache.pristine.txt")
    assert "(3.10)]" in cache.get("FIND_PACKAGE_MESSAGE_DETAILS_Python")
    targets = [PythonTarget.query(p) for p in gpu_build.venvs.values()]
    for target in targets + targets[:1]:
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
    pristine = (gpu_build.stage / "CMakeCache.pristine.txt").read_bytes()
    version = next(iter(gpu_build.venvs))

    def context(pkg_name: str = "pytorch", python: Path | None = None, **variant: str):
        return BuildContext.create(src, tmp_path / "prefix", python or gpu_build.venvs[version],
                                   {**gpu_build.variant, "PKG_NAME": pkg_name, **variant},
                                   gpu_build.base, stage)
    return src, stage, pristine, sentinel, context


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[: len(d) * 2 // 3], "truncated"),
    (lambda d: d.replace(b"USE_MAGMA:BOOL=ON", b"USE_MAGMA:BOOL\x00ON"), "NUL"),
    (lambda d: d.replace(b"USE_MAGMA:BOOL=ON", b"USE_MAGMA BOOL ON"), "not a cache entry"),
    (lambda d: b"".join(l for l in d.splitlines(True) if not l.startswith(b"_Python_INCLUDE_DIR:")),
     "_Python_INCLUDE_DIR"),
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
    assert len(written) == len(before)


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
def test_cpu_variant_has_no_cuda_outputs(venvs, tmp_path_factory) -> None:
    two = dict(list(venvs.items())[:2])
    run = harness.run_megabuild(two, tmp_path_factory.mktemp("megabuild-cpu"), gpu=False)
    assert "magma" not in run.phases
    assert not (run.stage / "cuda-linalg").exists()
    assert sorted(p.name for p in (run.stage / "libtorch" / "lib").iterdir()) == [
        "libc10.so", "libshm.so", "libtorch.so", "libtorch_cpu.so"]
    core = Counter(o for o in run.compiled() if harness.target_of(o) in harness.CORE_TARGETS)
    assert core and set(core.values()) == {1}
    assert CMakeCache.read(run.src / "build" / "CMakeCache.txt").get("USE_CUDA") in ("0", "OFF")


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
    with pytest.raises(MegabuildError, match="did not change after setting USE_MAGMA=ON"):
        run_step(ctx)
    assert not (ctx.stage_dir / "CMakeCache.pristine.txt").exists()
