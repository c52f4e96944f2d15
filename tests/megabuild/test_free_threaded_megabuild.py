"""One megabuild across a GIL Python and a real free-threaded CPython 3.13t.

3.13t is built from Debian trixie's python3.13 source with --disable-gil
(tests/support/free_threaded_python.py; cached outside the repository, so a machine builds it
once). The driver splits against the GIL Python, then retargets the pristine cache to 3.13t:
the core compiles once, the 3.13t step compiles only the Python targets against 3.13t's
headers, and the installed `_C` carries the `t` ABI tag and keeps the GIL off.
"""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from megabuild.cmake_cache import CMakeCache
from megabuild.python_target import PythonTarget
from tests.support import megabuild_harness as harness
from tests.support.free_threaded_python import FreeThreadedUnavailable, free_threaded_python
from tests.support.paths import REPO_ROOT

pytestmark = [pytest.mark.compile, pytest.mark.download]

FT = "3.13t"


@pytest.fixture(scope="module")
def python313t(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return free_threaded_python(tmp_path_factory.mktemp("python313t-build"))
    except FreeThreadedUnavailable as exc:
        pytest.skip(str(exc))


def free_threaded_megabuild(python313t: Path, cpythons: dict[str, Path],
                            tmp_path_factory: pytest.TempPathFactory, frontend: str):
    # the GIL build of the same minor version where there is one: the mix-up the guard must catch
    gil = "3.13" if "3.13" in cpythons else sorted(cpythons, key=harness.version_key)[-1]
    name = frontend.replace(".", "-")
    try:
        harness.check_tools()
        venvs = harness.make_venvs({gil: cpythons[gil], FT: python313t},
                                   tmp_path_factory.mktemp(f"ft-venvs-{name}"))
    except harness.HarnessUnavailable as exc:
        pytest.skip(str(exc))
    return harness.run_megabuild(venvs, tmp_path_factory.mktemp(f"ft-megabuild-{name}"),
                                 split_version=gil, frontend=frontend)


@pytest.fixture(scope="module")
def ft_build(python313t: Path, cpythons: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    return free_threaded_megabuild(python313t, cpythons, tmp_path_factory, "setup.py")


def test_the_interpreter_is_free_threaded(python313t: Path) -> None:
    proc = subprocess.run([str(python313t), "-c", "import sys, sysconfig; print(sys._is_gil_enabled(), "
                           "sysconfig.get_config_var('Py_GIL_DISABLED'), sys.abiflags)"],
                          capture_output=True, text=True)
    assert proc.stdout.split() == ["False", "1", "t"], proc.stderr


def test_core_objects_compile_once_across_gil_and_free_threaded(ft_build) -> None:
    core = Counter(o for o in ft_build.compiled() if harness.target_of(o) in harness.CORE_TARGETS)
    assert {harness.target_of(o) for o in core} >= {"c10", "torch_cpu", "torch", "shm"}
    assert set(core.values()) == {1}, {o: n for o, n in core.items() if n != 1}
    for version in ft_build.venvs:
        targets = {harness.target_of(o) for o in ft_build.phases[f"pytorch:{version}"]}
        # the split Python's own step finds its build up to date; 3.13t's recompiles the Python part
        expected = set() if version == ft_build.split_version else set(harness.PYTHON_TARGETS)
        assert targets == expected, (version, targets)


def test_retargeted_cache_names_only_the_free_threaded_python(ft_build) -> None:
    cache = CMakeCache.read(ft_build.src / "build" / "CMakeCache.txt")  # the last step's: 3.13t
    target = PythonTarget.query(ft_build.venvs[FT])
    assert target.free_threaded and target.soabi.startswith("cpython-313t-")
    assert cache.get("PYTHON_MODULE_EXTENSION") == f".{target.soabi}.so"
    assert cache.get("_Python_INCLUDE_DIR").endswith("python3.13t")
    assert cache.get("Python_EXECUTABLE") == str(ft_build.venvs[FT])


def test_c_imports_in_both_and_the_gil_stays_off_in_313t(ft_build, tmp_path: Path) -> None:
    seen = {}
    for version, python in ft_build.venvs.items():
        target = PythonTarget.query(python)
        torch_dir = Path(target.platlib) / "torch"
        (extension,) = torch_dir.glob("_C*.so")
        proc = subprocess.run([str(python), "-W", "error", "-c",
                               "import sys, torch; print(torch.compiled_for(), torch.self_test(), "
                               "getattr(sys, '_is_gil_enabled', lambda: True)())"],
                              capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr  # -W error: a GIL re-enabled on import would fail
        compiled_for, result, gil_enabled = proc.stdout.split()
        assert compiled_for == target.version and float(result) > 0
        seen[version] = (extension.name, gil_enabled)
    assert seen[FT][0].startswith("_C.cpython-313t-") and seen[FT][1] == "False"
    gil = next(v for v in seen if v != FT)
    assert "t-" not in seen[gil][0].split(".")[1] and seen[gil][1] == "True"


def test_pytorch_tests_gil_check_on_the_real_313t(ft_build, python313t: Path, tmp_path: Path) -> None:
    """The pytorch-tests runner's free-threaded check: our _C keeps the GIL off; a `torch`
    extension that does not declare Py_mod_gil turns it back on, and the check sees that."""
    sys.path.insert(0, str(REPO_ROOT / "recipe" / "pytorch_tests"))
    try:
        from run_pytorch_tests import gil_enabled_after_import
    finally:
        sys.path.pop(0)
    assert gil_enabled_after_import(str(ft_build.venvs[FT]), tmp_path) is False
    undeclared = tmp_path / "undeclared"
    undeclared.mkdir()
    (undeclared / "torch.c").write_text(
        "#include <Python.h>\n"
        "static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"torch\", NULL, -1, NULL};\n"
        "PyMODINIT_FUNC PyInit_torch(void) { return PyModule_Create(&m); }\n")
    config = subprocess.run([str(python313t), "-c", "import sysconfig as s; print(s.get_path('include')); "
                             "print(s.get_config_var('EXT_SUFFIX'))"], capture_output=True, text=True)
    include, suffix = config.stdout.split()
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", f"-I{include}", str(undeclared / "torch.c"),
                    "-o", str(undeclared / f"torch{suffix}")], check=True)
    assert gil_enabled_after_import(str(python313t), undeclared) is True


# -- the same on PyTorch's 2.14+ build (scikit-build-core) ------------------------------------------
@pytest.fixture(scope="module")
def ft_skb_build(python313t: Path, cpythons: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    return free_threaded_megabuild(python313t, cpythons, tmp_path_factory, "scikit-build-core")


def test_scikit_build_core_keeps_the_build_across_the_free_threaded_abi(ft_skb_build, tmp_path: Path) -> None:
    core = Counter(o for o in ft_skb_build.compiled() if harness.target_of(o) in harness.CORE_TARGETS)
    assert core and set(core.values()) == {1}, {o: n for o, n in core.items() if n != 1}
    # scikit-build-core reconfigures on every build; 3.13t recompiles the Python part only
    ft_targets = {harness.target_of(o) for o in ft_skb_build.phases[f"pytorch:{FT}"] if "cmTC_" not in o}
    assert ft_targets == set(harness.PYTHON_TARGETS)
    target = PythonTarget.query(ft_skb_build.venvs[FT])
    (extension,) = (Path(target.platlib) / "torch").glob("_C*.so")
    assert extension.name == f"_C{target.ext_suffix}" and "313t" in extension.name
    proc = subprocess.run([str(ft_skb_build.venvs[FT]), "-W", "error", "-c",
                           "import sys, torch; print(torch.compiled_for(), sys._is_gil_enabled())"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [target.version, "False"]
