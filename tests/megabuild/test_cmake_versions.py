"""The megabuild on every CMake the recipe accepts, and what every step refuses before it writes.

The tested releases are megabuild/tool_versions.py's (the floor, 3.30, the newest), PyPI's
wheels, on both front ends: the test project is split-built once and then built for two
Pythons, each switch counted object by object through the compiler launcher (every line is a
real compiler run). The GPU variant's MAGMA flip and a free-threaded Python run on the newest
release in test_scikit_build_megabuild.py, test_split_build.py and
test_free_threaded_megabuild.py (the harness's default CMake).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from megabuild.cmake_cache import CMakeCache
from megabuild.context import BuildContext
from megabuild.errors import MegabuildError
from megabuild.python_target import NO_ABIFLAGS, PythonTarget
from megabuild.scikit_build import ScikitBuildCoreFrontend
from megabuild.steps import run_step
from megabuild.tool_versions import CMAKE_SPEC, TESTED_CMAKE, parse_release
from common.links import link_or_copy
from tests.support import megabuild_harness as harness
from tests.support.build_tools import NEWEST_CMAKE, cmake_bin, tool_path

pytestmark = [pytest.mark.compile, pytest.mark.download]

BELOW_FLOOR = "3.26.4"  # PyPI's last 3.26 release: one minor below the floor
FIRST_NONE_SPELLING = (3, 30)  # FindPython writes an empty ABIFLAGS as `<none>` from here on


@pytest.fixture(scope="module")
def venvs(cpythons: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The split's 3.12 and one other Python; every run has its own work folder and prefixes."""
    other = next((v for v in ("3.11", "3.10", "3.13") if v in cpythons), None)
    if "3.12" not in cpythons or other is None:
        pytest.skip(f"needs CPython 3.12 and one more, found {sorted(cpythons)}")
    try:
        harness.check_tools()
        return harness.make_venvs({v: cpythons[v] for v in ("3.12", other)},
                                  tmp_path_factory.mktemp("cmake-range-venvs"))
    except harness.HarnessUnavailable as exc:
        pytest.skip(str(exc))


def by_target(objects: list[str]) -> Counter:
    return Counter(harness.target_of(o) for o in objects if "cmTC_" not in o)


def tree_state(root: Path) -> dict[str, tuple]:
    """Every path under root with its kind, size and content: what a refusal must not change."""
    state: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            state[rel] = ("link", str(path.readlink()))
        elif path.is_file():
            state[rel] = ("file", path.read_bytes())
        else:
            state[rel] = ("dir",)
    return state


@pytest.mark.parametrize("frontend", harness.FRONTENDS)
@pytest.mark.parametrize("cmake", TESTED_CMAKE)
def test_megabuild_on_each_tested_cmake(venvs, tmp_path_factory: pytest.TempPathFactory, cmake: str,
                                        frontend: str) -> None:
    # kept to the module's end: the shared venvs' torch links into this run's prefixes
    work = tmp_path_factory.mktemp(f"cmake-{cmake}-{frontend}")
    run = harness.run_megabuild(venvs, work / "build", frontend=frontend, split_version="3.12",
                                cmake=cmake)
    build_dir = "build" if frontend == "setup.py" else "megabuild-build"
    cache = CMakeCache.read(run.src / build_dir / "CMakeCache.txt")
    # the run used that release (CMake records itself at every configure)
    assert cache.get("CMAKE_COMMAND") == str(cmake_bin(cmake) / "cmake")
    release = parse_release(cmake)
    assert (int(cache.get("CMAKE_CACHE_MAJOR_VERSION")), int(cache.get("CMAKE_CACHE_MINOR_VERSION"))) == release[:2]

    split = by_target(run.compiled("split"))
    assert {"c10", "torch_cpu", "torch", "shm"} <= set(split), split
    python_objects = {t: n for t, n in split.items() if t in harness.PYTHON_TARGETS}
    assert set(python_objects) == set(harness.PYTHON_TARGETS), split
    for version in venvs:  # the split's own Python too: a rebuild, not a retarget
        switch = by_target(run.compiled(f"pytorch:{version}"))
        # only the Python-dependent objects, every one of them, as many as the split made
        assert switch == python_objects, (version, switch)

    # FindPython wrote its record again, in this release's spelling of an empty ABIFLAGS
    last = sorted(venvs, key=harness.version_key)[-1]
    record = cache.get("_Python_INTERPRETER_PROPERTIES").split(";")
    assert cache.get("_Python_EXECUTABLE") == str(venvs[last])
    assert record[5] == (NO_ABIFLAGS if release[:2] >= FIRST_NONE_SPELLING else ""), record


# -- refusals: one line, nothing written ---------------------------------------------------------
@pytest.fixture(scope="module")
def split_trees(venvs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, harness.MegabuildRun]:
    """A finished megabuild per front end on the newest CMake, to refuse steps against."""
    root = tmp_path_factory.mktemp("refusals")
    return {frontend: harness.run_megabuild(venvs, root / frontend.replace(".", "-"), frontend=frontend,
                                            split_version="3.12")
            for frontend in harness.FRONTENDS}


def context(run: harness.MegabuildRun, src: Path, pkg_name: str, base: dict[str, str] | None = None,
            **variant: str) -> BuildContext:
    python = run.venvs[run.split_version]
    return BuildContext.create(src, src / "prefix", python,
                               {**run.variant, "PKG_NAME": pkg_name, **variant},
                               base or run.base, src / "megabuild-stage")


@pytest.mark.parametrize("frontend", harness.FRONTENDS)
@pytest.mark.parametrize("step", ["libtorch-split", "pytorch"])
def test_a_cmake_below_the_floor_is_refused_before_anything_is_written(
        split_trees, tmp_path: Path, frontend: str, step: str) -> None:
    run = split_trees[frontend]
    old = {**run.base, "PATH": tool_path(BELOW_FLOOR, path=run.base["PATH"])}
    # a fresh tree for the split; the finished one (its build folder and stage) for pytorch
    src = harness.copy_project(tmp_path / "src", frontend) if step == "libtorch-split" else run.src
    before = tree_state(src)
    with pytest.raises(MegabuildError) as info:
        run_step(context(run, src, step, base=old))
    message = str(info.value)
    assert "\n" not in message
    assert f"CMake {BELOW_FLOOR}, outside the range this recipe builds with ({CMAKE_SPEC})" in message
    assert tree_state(src) == before


def test_the_range_is_the_recipes(repo_root: Path) -> None:
    """Both recipes ask for the range the driver enforces (lint checks every step; this is the
    one sentence a reader looks for)."""
    for recipe in ("meta.yaml", "recipe.yaml"):
        text = (repo_root / "recipe" / recipe).read_text()
        assert re.findall(r"- (cmake\b[^#\n]*?)\s*(?:#.*)?$", text, re.MULTILINE).count(CMAKE_SPEC) == 2, recipe


@pytest.mark.parametrize("frontend", harness.FRONTENDS)
def test_every_step_refuses_another_trees_build_folder_and_stage(split_trees, tmp_path: Path,
                                                                 frontend: str) -> None:
    """Tree B is a copy of tree A after A's megabuild: its build folder and stage still say A.
    Every step in B refuses with one line naming A, and B is left as it was."""
    run = split_trees[frontend]
    other = tmp_path / "copy"
    shutil.copytree(run.src, other, symlinks=True)
    # the CUDA variants' linalg stage, so that step gets past "run the split first"
    linalg = other / "megabuild-stage" / "cuda-linalg" / "magma" / "lib"
    linalg.mkdir(parents=True)
    (linalg / "libtorch_cuda_linalg.so").write_bytes(b"staged by the split of tree A\n")
    before = tree_state(other)
    for step, variant in (("libtorch-split", {}), ("libtorch", {}),
                          ("libtorch-cuda-linalg", {"use_magma": "true"}), ("pytorch", {})):
        with pytest.raises(MegabuildError) as info:
            run_step(context(run, other, step, **variant))
        message = str(info.value)
        assert "\n" not in message and str(run.src) in message, (step, message)
        assert "source tree" in message, (step, message)
        assert tree_state(other) == before, step


def python3_project(dest: Path, frontend: str) -> Path:
    """The test project finding its interpreter with find_package(Python3 ...) instead."""
    src = harness.copy_project(dest, frontend)
    cmakelists = src / "CMakeLists.txt"
    text = cmakelists.read_text()
    text = re.sub(r"\bfind_package\(Python ", "find_package(Python3 ", text)
    text = re.sub(r"\bPython(_[A-Za-z]|::)", r"Python3\1", text)
    assert "find_package(Python3 " in text and "Python_" not in text
    cmakelists.write_text(text)
    setup = src / "setup.py"
    if setup.exists():  # it names the interpreter under the prefix the project uses
        text = setup.read_text()
        assert '"Python_EXECUTABLE": sys.executable,' in text
        setup.write_text(text.replace('"Python_EXECUTABLE": sys.executable,', '"Python3_EXECUTABLE": sys.executable,'))
    return src


# -- refusals after CMake's configure, before the first compile ----------------------------------
def own_compile_log(run: harness.MegabuildRun, folder: Path) -> tuple[dict[str, str], Path]:
    """run.base with a compiler launcher of its own, so a test counts only its own compiles."""
    log_file = folder / "compiles.log"
    log_file.write_text("")
    launcher = str(harness.write_launcher(folder / "launch.sh", log_file))
    return {**run.base, **{f"CMAKE_{lang}_COMPILER_LAUNCHER": launcher for lang in ("C", "CXX", "CUDA")}}, log_file


def objects_compiled(log_file: Path, build_dir: Path) -> int:
    """The project's objects compiled: the launcher's lines that are not CMake's compiler checks
    (cmTC_), which must agree with the object files in the build folder's target folders."""
    logged = [line for line in log_file.read_text().splitlines() if line and "cmTC_" not in line]
    on_disk = [p for p in build_dir.rglob("*.o") if any(part.endswith(".dir") for part in p.parts)] \
        if build_dir.exists() else []
    assert len(logged) == len(on_disk), (logged, on_disk)
    return len(logged)


def build_dir_of(src: Path, frontend: str) -> Path:
    return src / ("build" if frontend == "setup.py" else "megabuild-build")


@pytest.mark.parametrize("frontend", harness.FRONTENDS)
def test_a_python3_prefix_project_is_refused_by_the_split_before_it_stages(
        split_trees, tmp_path: Path, frontend: str) -> None:
    run = split_trees[frontend]
    src = python3_project(tmp_path / "src", frontend)
    base, log_file = own_compile_log(run, tmp_path)
    with pytest.raises(MegabuildError) as info:
        run_step(context(run, src, "libtorch-split", base=base))
    message = str(info.value)
    assert "\n" not in message
    assert "find_package(Python3 ...)" in message and "find_package(Python COMPONENTS" in message
    assert (build_dir_of(src, frontend) / "CMakeCache.txt").is_file()  # it configured, then stopped
    assert objects_compiled(log_file, build_dir_of(src, frontend)) == 0
    stage = src / "megabuild-stage"
    assert not (stage / "CMakeCache.pristine.txt").exists() and not (stage / "libtorch").exists()
    assert not (stage / "split-wheel").exists() and not (stage / "split-wheel-layout").exists()


def renamed_magma_switch(dest: Path, frontend: str) -> Path:
    """The test project whose CMakeLists.txt reads MY_MAGMA; its scikit-build-core form feeds it
    from the environment's USE_MAGMA (`MY_MAGMA = {env = "USE_MAGMA"}`), so no USE_MAGMA
    reaches the cache."""
    src = harness.copy_project(dest, frontend)
    cmakelists = src / "CMakeLists.txt"
    text = cmakelists.read_text()
    assert 'option(USE_MAGMA "' in text and "if(USE_MAGMA)" in text
    cmakelists.write_text(text.replace("USE_MAGMA", "MY_MAGMA"))
    if frontend == "scikit-build-core":
        pyproject = src / "pyproject.toml"
        text = pyproject.read_text()
        assert 'USE_MAGMA = {env = "USE_MAGMA"}' in text
        pyproject.write_text(text.replace('USE_MAGMA = {env = "USE_MAGMA"}', 'MY_MAGMA = {env = "USE_MAGMA"}'))
    return src


def test_a_magma_switch_the_cache_lacks_is_refused_after_configure(split_trees, tmp_path: Path) -> None:
    """The CUDA split flips USE_MAGMA in the cache after its first build; a project that takes
    it under another name is refused right after the configure, naming the define entry."""
    frontend = "scikit-build-core"
    run = split_trees[frontend]
    src = renamed_magma_switch(tmp_path / "src", frontend)
    base, log_file = own_compile_log(run, tmp_path)
    ctx = context(run, src, "libtorch-split", base=base, **harness.backend_variant("cuda"))
    assert ctx.env["USE_MAGMA"] == "0"
    with pytest.raises(MegabuildError) as info:
        run_step(ctx)
    message = str(info.value)
    assert "\n" not in message
    assert "USE_MAGMA is not in the cache after CMake's configure" in message
    assert "the driver set USE_MAGMA=0" in message
    assert 'reads it only as MY_MAGMA = {env = "USE_MAGMA"}' in message
    assert 'define USE_MAGMA = {env = "USE_MAGMA"}' in message
    assert objects_compiled(log_file, build_dir_of(src, frontend)) == 0
    assert not (src / "megabuild-stage" / "cuda-linalg").exists()
    assert not (src / "megabuild-stage" / "split-wheel").exists()


def test_a_magma_switch_the_configure_overrides_is_refused_after_configure(split_trees, tmp_path: Path) -> None:
    """setup.py hands USE_MAGMA=0 to CMake, but the project forces it ON: the nomagma stage
    would hold the magma library, so the split stops after the configure."""
    frontend = "setup.py"
    run = split_trees[frontend]
    src = harness.copy_project(tmp_path / "src", frontend)
    cmakelists = src / "CMakeLists.txt"
    text = cmakelists.read_text()
    forced = 'option(USE_MAGMA "Link libtorch_cuda_linalg against MAGMA" OFF)'
    assert forced in text
    cmakelists.write_text(text.replace(forced, 'set(USE_MAGMA ON CACHE BOOL "MAGMA, always" FORCE)'))
    base, log_file = own_compile_log(run, tmp_path)
    with pytest.raises(MegabuildError) as info:
        run_step(context(run, src, "libtorch-split", base=base, **harness.backend_variant("cuda")))
    message = str(info.value)
    assert "\n" not in message
    assert "USE_MAGMA is ON after CMake's configure, though the driver set USE_MAGMA=0" in message
    assert objects_compiled(log_file, build_dir_of(src, frontend)) == 0
    assert not (src / "megabuild-stage" / "cuda-linalg").exists()


def test_a_flip_the_configure_undoes_is_refused_before_the_linalg_rebuild(split_trees, tmp_path: Path) -> None:
    """As PyTorch when MAGMA is not found (caffe2_update_option(USE_MAGMA OFF)): the configure
    after the flip writes USE_MAGMA back to OFF. The split stops after that configure, before
    linalg compiles a second time, and leaves no magma stage."""
    frontend = "setup.py"
    run = split_trees[frontend]
    src = harness.copy_project(tmp_path / "src", frontend)
    cmakelists = src / "CMakeLists.txt"
    text = cmakelists.read_text()
    option = 'option(USE_MAGMA "Link libtorch_cuda_linalg against MAGMA" OFF)\n'
    assert option in text
    cmakelists.write_text(text.replace(option, option + 'if(USE_MAGMA)\n  message(STATUS "MAGMA not found")\n'
                                       '  set(USE_MAGMA OFF CACHE BOOL "MAGMA not found" FORCE)\nendif()\n'))
    base, log_file = own_compile_log(run, tmp_path)
    base.update(MEGATEST_CORE_UNITS="1", MEGATEST_CORE_WEIGHT="1")
    with pytest.raises(MegabuildError) as info:
        run_step(context(run, src, "libtorch-split", base=base, **harness.backend_variant("cuda")))
    message = str(info.value)
    assert "\n" not in message
    assert "the configure after setting USE_MAGMA=ON turned it back to OFF" in message
    compiled = [line for line in log_file.read_text().splitlines() if "cmTC_" not in line]
    # the split's build compiled each object once; after the flip's configure, nothing
    assert len(compiled) == len(set(compiled)) == objects_compiled(log_file, build_dir_of(src, frontend))
    assert [harness.target_of(o) for o in compiled].count("torch_cuda_linalg") == 1
    stage = src / "megabuild-stage"
    assert not (stage / "cuda-linalg" / "magma").exists() and (stage / "cuda-linalg" / "nomagma.json").is_file()
    assert not (stage / "CMakeCache.pristine.txt").exists()


def scikit_build_cores_choice(python: Path, env: dict[str, str], spec: str) -> str:
    """The CMake the real scikit-build-core picks for `spec` in `env` (its own search)."""
    proc = subprocess.run([str(python), "-c", "import os; from packaging.specifiers import SpecifierSet; "
                           "from scikit_build_core.cmake import CMake; "
                           f"print(CMake.default_search(version=SpecifierSet({spec!r}), env=os.environ).cmake_path)"],
                          capture_output=True, text=True, env=env, check=True)
    return proc.stdout.strip()


def test_the_cmake_scikit_build_core_runs_is_the_one_checked(split_trees, tmp_path: Path) -> None:
    """PyPI's cmake in the host Python comes before PATH's for scikit-build-core whenever the
    project accepts its version: the check follows the same rules and refuses that one."""
    run = split_trees["scikit-build-core"]
    module = cmake_bin(BELOW_FLOOR).parents[2]  # the unpacked wheel: cmake/ and its dist-info
    base, log_file = own_compile_log(run, tmp_path)
    base = {**base, "PYTHONPATH": str(module)}
    python = run.venvs[run.split_version]
    module_cmake = str(module / "cmake" / "data" / "bin" / "cmake")
    path_cmake = str(cmake_bin(NEWEST_CMAKE) / "cmake")
    src = harness.copy_project(tmp_path / "src", "scikit-build-core")
    ctx = context(run, src, "libtorch-split", base=base)
    # the project's own cmake.version (>=3.27) skips the module's 3.26: PATH's builds, and passes
    assert 'cmake.version = ">=3.27"' in (src / "pyproject.toml").read_text()
    assert scikit_build_cores_choice(python, dict(ctx.env), ">=3.27") == path_cmake
    assert ScikitBuildCoreFrontend().check(ctx) == path_cmake
    # a project that accepts 3.15 gets the module's 3.26 (outside the recipe's range): refused,
    # although PATH's CMake is in range
    pyproject = src / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('cmake.version = ">=3.27"', 'cmake.version = ">=3.15"'))
    assert scikit_build_cores_choice(python, dict(ctx.env), ">=3.15") == module_cmake
    before = tree_state(src)
    with pytest.raises(MegabuildError) as info:
        run_step(ctx)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{module_cmake} is CMake {BELOW_FLOOR}, outside the range this recipe "
                              f"builds with ({CMAKE_SPEC}); it is PyPI's cmake in {python}'s environment")
    assert tree_state(src) == before
    assert objects_compiled(log_file, build_dir_of(src, "scikit-build-core")) == 0


# -- PyPI's cmake in each step's own Python, that environment made again at one prefix ------------
def python_at(prefix: Path, interpreter: Path, wheelhouse: Path) -> Path:
    """A fresh environment at `prefix` (whatever was there goes, as conda-build makes every
    output's host environment at the same $PREFIX) with the build requirements and PyPI's cmake
    installed into it, `prefix/bin/cmake` running that one."""
    shutil.rmtree(prefix, ignore_errors=True)
    python = harness.make_venv(interpreter, prefix, wheelhouse)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    files = cmake_bin(NEWEST_CMAKE).parents[2]
    for entry in files.iterdir():
        shutil.copytree(entry, site / entry.name, copy_function=link_or_copy)
    wrapper = prefix / "bin" / "cmake"
    wrapper.write_text(f'#!/bin/sh\nexec "{site}/cmake/data/bin/cmake" "$@"\n')
    wrapper.chmod(0o755)
    return python


@pytest.fixture(scope="module")
def same_prefix_run(venvs, cpythons, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """setup.py front end: the split with 3.12 at one prefix, the prefix made again with the
    other Python for its pytorch step, then made again with 3.12 and the split run once more."""
    other = next(v for v in venvs if v != "3.12")
    work = tmp_path_factory.mktemp("same-prefix")
    wheelhouse = harness.fetch_setuptools(venvs["3.12"].parents[2] / "wheelhouse")
    prefix = work / "env"
    log_file = work / "compiles.log"
    log_file.write_text("")
    base = harness.base_environ(harness.write_launcher(work / "launch.sh", log_file), core_units=1,
                                core_weight=1)
    base["PATH"] = f"{prefix / 'bin'}:{base['PATH']}"  # the environment's cmake first
    src = harness.copy_project(work / "src")
    variant = {**harness.backend_variant("cpu"), "blas_impl": "generic", "CPU_COUNT": "2",
               "target_platform": "linux-64", "megabuild": "true"}
    out: dict = {"src": src, "prefix": prefix, "other": other, "compiled": {}}

    def step(label: str, pkg_name: str, python: Path) -> None:
        start = len(log_file.read_text().splitlines())
        run_step(BuildContext.create(src, work / f"out-{label}", python, {**variant, "PKG_NAME": pkg_name}, base))
        out["compiled"][label] = [line for line in log_file.read_text().splitlines()[start:] if "cmTC_" not in line]

    python = python_at(prefix, cpythons["3.12"], wheelhouse)
    step("split", "libtorch-split", python)
    out["split_cmake"] = CMakeCache.read(src / "megabuild-stage" / "CMakeCache.pristine.txt").get("CMAKE_COMMAND")
    step("libtorch", "libtorch", python)
    python = python_at(prefix, cpythons[other], wheelhouse)
    out["split_cmake_gone"] = not Path(out["split_cmake"]).exists()
    out["other_site"] = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                            capture_output=True, text=True, check=True).stdout.strip())
    step("pytorch", "pytorch", python)
    out["after_pytorch"] = CMakeCache.read(src / "build" / "CMakeCache.txt")
    python = python_at(prefix, cpythons["3.12"], wheelhouse)
    step("split-again", "libtorch-split", python)
    out["python"] = python
    return out


def test_a_cmake_gone_with_its_environment_is_replaced_by_the_steps(same_prefix_run) -> None:
    """The split's CMake lived in the split's environment; the pytorch step's environment at the
    same prefix has its own. The step builds with its own CMake, never the gone path."""
    run = same_prefix_run
    assert "/site-packages/cmake/data/bin/cmake" in run["split_cmake"] and "python3.12" in run["split_cmake"]
    assert run["split_cmake_gone"]  # when the pytorch step ran
    cache = run["after_pytorch"]
    assert cache.get("CMAKE_COMMAND") == str(run["other_site"] / "cmake" / "data" / "bin" / "cmake")
    assert Path(cache.get("CMAKE_ROOT")).is_relative_to(run["other_site"])
    assert {harness.target_of(o) for o in run["compiled"]["pytorch"]} == set(harness.PYTHON_TARGETS)
    assert len(run["compiled"]["pytorch"]) == 3


def test_the_split_run_again_saves_a_pristine_cache_of_its_own_python(same_prefix_run) -> None:
    """After a pytorch step the build folder names that step's Python; the split run again
    puts it back to its own before it builds, and saves a pristine cache naming 3.12."""
    run = same_prefix_run
    pristine = CMakeCache.read(run["src"] / "megabuild-stage" / "CMakeCache.pristine.txt")
    named = PythonTarget.from_cmake_cache(pristine)
    assert pristine.get("Python_EXECUTABLE") == str(run["python"])
    assert named.major_minor == "3.12" and named.version == PythonTarget.query(run["python"]).version
    assert PythonTarget.from_cmake_cache(run["after_pytorch"]).major_minor == run["other"]
    # only the Python-dependent objects, rebuilt for the split's Python again
    assert {harness.target_of(o) for o in run["compiled"]["split-again"]} == set(harness.PYTHON_TARGETS)
    assert len(run["compiled"]["split-again"]) == 3
