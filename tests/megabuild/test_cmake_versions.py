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
from collections import Counter
from pathlib import Path

import pytest

from megabuild.cmake_cache import CMakeCache
from megabuild.context import BuildContext
from megabuild.errors import MegabuildError
from megabuild.python_target import NO_ABIFLAGS
from megabuild.steps import run_step
from megabuild.tool_versions import CMAKE_SPEC, TESTED_CMAKE, parse_release
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


@pytest.mark.parametrize("frontend", harness.FRONTENDS)
def test_a_python3_prefix_project_is_refused_by_the_split_before_it_stages(
        split_trees, tmp_path: Path, frontend: str) -> None:
    run = split_trees[frontend]
    src = python3_project(tmp_path / "src", frontend)
    with pytest.raises(MegabuildError) as info:
        run_step(context(run, src, "libtorch-split"))
    message = str(info.value)
    assert "\n" not in message
    assert "find_package(Python3 ...)" in message and "find_package(Python COMPONENTS" in message
    stage = src / "megabuild-stage"
    assert not (stage / "CMakeCache.pristine.txt").exists() and not (stage / "libtorch").exists()
