"""The megabuild on PyTorch's 2.14+ build: the test project's scikit-build-core form (no setup.py),
built by the driver with the real scikit-build-core pinned in requirements-dev.txt.

Every Python has a virtual environment of its own with its own scikit-build-core install (as
every conda host environment has), which is exactly what makes a naive front end throw the
build folder away. The session-scoped GPU-variant build (split with the USE_MAGMA flip, then
one pytorch step per Python) is counted object by object through a compiler launcher.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support import megabuild_harness as harness
from tests.support.build_tools import tool_path
from megabuild.cmake_cache import CMakeCache
from megabuild.context import BuildContext
from megabuild.errors import MegabuildError
from megabuild.frontend import SetupPyFrontend, select_frontend
from megabuild.python_target import PythonTarget
from megabuild.scikit_build import (BACKEND_DIR, BUILD_DIR_NAME, ScikitBuildCoreFrontend,
                                    cache_overrides, same_setting)
from megabuild.steps import run_step

pytestmark = [pytest.mark.compile, pytest.mark.download]

FRONTEND = "scikit-build-core"
PY_STEP_TARGETS = set(harness.PYTHON_TARGETS)


def by_target(objects: list[str]) -> Counter:
    return Counter(harness.target_of(o) for o in objects if "cmTC_" not in o)


@pytest.fixture(scope="session")
def skb_venvs(cpythons: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Venvs of its own (the setup.py tests inspect what their builds installed in theirs)."""
    try:
        harness.check_tools()
        return harness.make_venvs(cpythons, tmp_path_factory.mktemp("skb-venvs"))
    except harness.HarnessUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def skb_build(skb_venvs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    if len(skb_venvs) < 3:
        pytest.skip(f"the scikit-build-core megabuild wants three Pythons, found {sorted(skb_venvs)}")
    return harness.run_megabuild(skb_venvs, tmp_path_factory.mktemp("skb-gpu"), gpu=True,
                                 frontend=FRONTEND)


def skbuild_info(run) -> dict:
    return json.loads((run.src / BUILD_DIR_NAME / ".skbuild-info.json").read_text())


# -- the tree picks the front end ---------------------------------------------------------------
def test_the_source_tree_picks_the_front_end(tmp_path: Path) -> None:
    new = harness.copy_project(tmp_path / "new", FRONTEND)
    old = harness.copy_project(tmp_path / "old")
    assert not (new / "setup.py").exists() and (old / "setup.py").exists()
    assert isinstance(select_frontend({}, new), ScikitBuildCoreFrontend)
    assert isinstance(select_frontend({}, old), SetupPyFrontend)


def test_a_tree_with_neither_build_is_one_line_and_untouched(tmp_path: Path) -> None:
    src = harness.copy_project(tmp_path / "src", FRONTEND)
    (src / "pyproject.toml").write_text('[build-system]\nbuild-backend = "hatchling.build"\n')
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    with pytest.raises(MegabuildError, match="neither a setup.py nor a pyproject.toml"):
        select_frontend({}, src)
    proc = subprocess.run([sys.executable, "-m", "megabuild"], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(
                              harness.REPO_ROOT / "recipe"), "SRC_DIR": str(src),
                              "PREFIX": str(tmp_path / "prefix"), "PYTHON": sys.executable,
                              "PKG_NAME": "libtorch-split", "PKG_VERSION": "2.14.1"})
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "neither a setup.py nor a pyproject.toml" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before


# -- compile counting ---------------------------------------------------------------------------
def test_core_objects_compile_once_across_all_pythons(skb_build) -> None:
    counts = Counter(o for o in skb_build.compiled() if harness.target_of(o) in harness.CORE_TARGETS)
    assert {harness.target_of(o) for o in counts} >= {"c10", "torch_cpu", "torch", "shm",
                                                       "torch_shm_manager", "torch_cuda"}
    assert set(counts.values()) == {1}, {o: n for o, n in counts.items() if n != 1}


def test_a_python_switch_recompiles_only_the_python_dependent_objects(skb_build) -> None:
    python_objects = {o for o in skb_build.compiled("split") if harness.target_of(o) in PY_STEP_TARGETS}
    assert len(python_objects) == 3  # torch_python's two sources and the _C stub
    steps = [p for p in skb_build.phases if p.startswith("pytorch:")]
    assert len(steps) == len(skb_build.venvs) >= 3
    for phase in steps:
        compiled = [o for o in skb_build.phases[phase] if "cmTC_" not in o]
        assert set(compiled) == python_objects, (phase, compiled)


def test_magma_flip_recompiles_only_linalg(skb_build) -> None:
    assert set(by_target(skb_build.phases["magma"])) == {"torch_cuda_linalg"}
    nomagma, magma = (skb_build.stage / "cuda-linalg" / f / "lib" / "libtorch_cuda_linalg.so"
                      for f in ("nomagma", "magma"))
    assert nomagma.read_bytes() != magma.read_bytes()


def test_every_step_ran_the_one_scikit_build_core_copy(skb_build) -> None:
    info = skbuild_info(skb_build)
    copy = skb_build.stage / BACKEND_DIR / "scikit_build_core"
    assert Path(info["skbuild_path"]).resolve() == copy.resolve()
    assert Path(info["source_dir"]) == skb_build.src.resolve()
    assert info["skbuild_version"] == harness.pinned("scikit-build-core").split("==")[1]
    # the last step was the newest Python; its own environment has its own install
    last = sorted(skb_build.venvs, key=harness.version_key)[-1]
    assert info["python_executable"] == str(skb_build.venvs[last])
    own = subprocess.run([str(skb_build.venvs[last]), "-c", "import scikit_build_core as s; "
                          "print(s.__file__)"], capture_output=True, text=True, check=True)
    assert Path(own.stdout.strip()).parent != copy
    assert not (skb_build.src / "build").exists()  # no setup.py-era build/ folder


def test_the_cache_keeps_the_magma_flip_against_the_environment(skb_build) -> None:
    cache = CMakeCache.read(skb_build.src / BUILD_DIR_NAME / "CMakeCache.txt")
    assert cache.get("USE_MAGMA") == "ON"
    ctx = skb_build.context(next(iter(skb_build.venvs)), "pytorch")
    assert ctx.env["USE_MAGMA"] == "0"
    assert cache_overrides(ctx.env, cache) == {"USE_MAGMA": "ON"}


# -- what was staged and installed ------------------------------------------------------------
def test_libtorch_is_staged_from_the_wheel(skb_build) -> None:
    wheels = list((skb_build.stage / "split-wheel").glob("*.whl"))
    assert len(wheels) == 1 and wheels[0].name.startswith("megatorch-2.13.0-")
    lib = skb_build.stage / "libtorch" / "lib"
    assert sorted(p.name for p in lib.iterdir()) == [
        "libc10.so", "libshm.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so"]
    staged = [p for p in (skb_build.stage / "libtorch").rglob("*") if p.is_file()]
    assert not [p for p in staged if p.suffix in (".cpp", ".c", ".py", ".pyc")]
    assert (skb_build.stage / "libtorch" / "include" / "ATen" / "cuda" / "CUDAConfig.h").read_text() \
        .count("AT_MAGMA_ENABLED() 1") == 1
    assert (skb_build.stage / "libtorch" / "bin" / "torch_shm_manager").stat().st_mode & 0o111


def test_each_python_imports_its_own_extension(skb_build, tmp_path: Path) -> None:
    for version, python in skb_build.venvs.items():
        target = PythonTarget.query(python)
        torch_dir = Path(target.platlib) / "torch"
        assert sorted(p.name for p in torch_dir.glob("_C*.so")) == [f"_C{target.ext_suffix}"]
        proc = subprocess.run([str(python), "-c", "import torch, importlib.metadata as m; "
                               "print(torch.compiled_for(), torch.self_test(), m.version('megatorch'))"],
                              capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        compiled_for, result, package_version = proc.stdout.split()
        assert compiled_for == target.version and float(result) > 0
        assert package_version == "2.13.0"  # no .post<N> from the conda build number
        lib = torch_dir / "lib" / "libtorch_cpu.so"
        assert lib.is_symlink() and lib.resolve() == (skb_build.prefixes[version] / "lib" /
                                                      "libtorch_cpu.so").resolve()
        assert not list(torch_dir.rglob("*.cpp"))


# -- the build folder's guard -----------------------------------------------------------------
def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            h.update(p.relative_to(folder).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def borrowed_build(skb_build, tmp_path: Path):
    """A second source tree whose build folder is a copy of skb_build's."""
    src = harness.copy_project(tmp_path / "other-src", FRONTEND)
    shutil.copytree(skb_build.src / BUILD_DIR_NAME, src / BUILD_DIR_NAME, symlinks=True)
    version = skb_build.split_version
    ctx = BuildContext.create(src, tmp_path / "prefix", skb_build.venvs[version],
                              {**skb_build.variant, "PKG_NAME": "libtorch-split"}, skb_build.base)
    return src / BUILD_DIR_NAME, ctx


def test_a_build_folder_of_another_source_tree_is_refused(borrowed_build) -> None:
    build_dir, ctx = borrowed_build
    before = digest(build_dir)
    with pytest.raises(MegabuildError, match="was configured for the source tree .* remove"):
        run_step(ctx)
    assert digest(build_dir) == before


def test_a_build_folder_of_another_scikit_build_core_is_refused(borrowed_build) -> None:
    build_dir, ctx = borrowed_build
    info_file = build_dir / ".skbuild-info.json"
    info = json.loads(info_file.read_text())
    info["source_dir"] = str(ctx.src_dir.resolve())
    info["skbuild_path"] = "/elsewhere/site-packages/scikit_build_core"
    info_file.write_text(json.dumps(info))
    (build_dir / "CMakeCache.txt").unlink()
    before = digest(build_dir)
    with pytest.raises(MegabuildError, match="configured by the scikit-build-core at /elsewhere"):
        run_step(ctx)
    assert digest(build_dir) == before


def test_an_unreadable_build_record_is_refused(borrowed_build) -> None:
    build_dir, ctx = borrowed_build
    (build_dir / ".skbuild-info.json").write_text('{"source_dir": ')
    before = digest(build_dir)
    with pytest.raises(MegabuildError, match="unreadable .* throw the whole build away"):
        run_step(ctx)
    assert digest(build_dir) == before


def test_a_scikit_build_core_older_than_1_0_is_refused(cpythons, tmp_path: Path) -> None:
    """The real scikit-build-core 0.11.6 from PyPI in the build environment."""
    version = sorted(cpythons, key=harness.version_key)[-1]
    venv = tmp_path / "old-venv"
    subprocess.run([str(cpythons[version]), "-m", "venv", str(venv)], check=True)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           "--no-deps", "--disable-pip-version-check", "scikit-build-core==0.11.6"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"scikit-build-core 0.11.6 not installable here: {proc.stderr.strip()[-200:]}")
    src = harness.copy_project(tmp_path / "src", FRONTEND)
    ctx = BuildContext.create(src, tmp_path / "prefix", venv / "bin" / "python",
                              {"PKG_NAME": "libtorch-split", "cuda_compiler_version": "None",
                               "blas_impl": "generic", "target_platform": "linux-64",
                               "CPU_COUNT": "2"}, {"PATH": tool_path(path="/usr/bin:/bin")})
    with pytest.raises(MegabuildError, match=r"scikit-build-core 0\.11\.6 .* older than 1\.0"):
        run_step(ctx)
    assert not (src / BUILD_DIR_NAME).exists()
    assert not (ctx.stage_dir / BACKEND_DIR).exists()


# -- how the environment reaches CMake ---------------------------------------------------------
def test_cmake_variables_reach_cmake_through_the_channels_it_reads(tmp_path: Path) -> None:
    src = harness.copy_project(tmp_path / "src", FRONTEND)
    ctx = BuildContext.create(src, tmp_path / "prefix", Path(sys.executable),
                              {"PKG_NAME": "pytorch", "cuda_compiler_version": "None",
                               "blas_impl": "generic", "target_platform": "linux-64",
                               "CPU_COUNT": "2"},
                              {"PATH": "/usr/bin:/bin", "FEEDSTOCK_MAX_JOBS": "3",
                               "CMAKE_CXX_COMPILER_LAUNCHER": "ccache"})
    frontend = ScikitBuildCoreFrontend()
    settings = frontend.config_settings(ctx)
    assert all(s.startswith("--config-settings=") for s in settings)
    pairs = dict(s.removeprefix("--config-settings=").split("=", 1) for s in settings)
    assert pairs["build-dir"] == str(src / BUILD_DIR_NAME)
    assert pairs["cmake.build-type"] == "Release"
    assert pairs["install.strip"] == "false"  # the packages keep their symbol tables, as with setup.py
    assert "cmake.define.CMAKE_JOB_POOLS" in pairs and "cmake.define.CMAKE_PROJECT_INCLUDE" in pairs
    # CMake reads these from the environment itself: not repeated as defines
    assert not [k for k in pairs if k.endswith(("_COMPILER_LAUNCHER", "CMAKE_GENERATOR"))]
    env = frontend.environment(ctx)
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "3" and env["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
    assert env["PYTHONPATH"].split(":")[0] == str(ctx.stage_dir / BACKEND_DIR)
    assert env["USE_CUDA"] == "0"


def test_job_pools_and_the_compile_launcher_reached_the_real_cache(skb_build) -> None:
    cache = CMakeCache.read(skb_build.src / BUILD_DIR_NAME / "CMakeCache.txt")
    assert cache.get("CMAKE_JOB_POOLS").startswith("feedstock_heavy=")
    assert Path(cache.get("CMAKE_PROJECT_INCLUDE")).is_file()
    # the compile cache's channel: CMake took the launcher from the environment
    assert cache.get("CMAKE_CXX_COMPILER_LAUNCHER") == skb_build.base["CMAKE_CXX_COMPILER_LAUNCHER"]
    assert cache.get("MEGATEST_CORE_UNITS") == skb_build.base["MEGATEST_CORE_UNITS"]


def test_boolean_spellings_are_one_setting() -> None:
    assert same_setting("ON", "1") and same_setting("off", "0") and same_setting("x", "x")
    assert not same_setting("ON", "0") and not same_setting("8.0", "9.0")
