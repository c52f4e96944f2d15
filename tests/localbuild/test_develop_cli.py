"""--develop's own logic without a build: the checkout and flag checks (one line, exit 2,
nothing written), the Python choice, the dry run's lines, what makes the environment stale,
the variant pins, the recompiled-object count from a .ninja_log, the develop environment."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from localbuild.develop import check_folder, check_tree, choose_python, version_note
from localbuild.errors import LocalBuildError
from megabuild.develop import develop_environment, variables_script
from megabuild.ninja_log import last_entries, recompiled
from tests.support.build_locally import make_feedstock
from tests.support.paths import REPO_ROOT

CPU = "linux_64_blas_implgenericcuda_compiler_versionNone"


def _in_location():
    spec = importlib.util.spec_from_file_location(
        "develop_in_location", REPO_ROOT / "localbuild" / "in_container" / "develop.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checkout(root: Path, backend: str = "scikit_build_core.build", version: str | None = "2.14.1") -> Path:
    (root / "torch").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("project(torch)\n")
    (root / "pyproject.toml").write_text(f'[build-system]\nbuild-backend = "{backend}"\n')
    if version:
        (root / "version.txt").write_text(version + "\n")
    return root


def test_a_scikit_build_core_checkout_is_taken(tmp_path):
    assert check_tree(str(checkout(tmp_path / "pytorch"))) == (tmp_path / "pytorch").resolve()


@pytest.mark.parametrize("make, says", [
    (lambda p: None, "no such folder"),
    (lambda p: p.write_text("x"), "not a folder"),
    (lambda p: p.mkdir(), "not a PyTorch source tree"),
    (lambda p: (checkout(p), (p / "pyproject.toml").unlink(), (p / "setup.py").write_text("")), "a setup.py tree"),
    (lambda p: (checkout(p), (p / "pyproject.toml").write_bytes(b"\xff\xfe[x")), "not UTF-8"),
    (lambda p: (checkout(p), (p / "pyproject.toml").write_text("[build-system\n")), "does not parse"),
    (lambda p: checkout(p, backend="setuptools.build_meta"), "not a PyTorch source tree"),
])
def test_what_is_not_a_checkout_to_develop_is_one_line(tmp_path, make, says):
    tree = tmp_path / "tree"
    make(tree)
    with pytest.raises(LocalBuildError) as err:
        check_tree(str(tree))
    assert says in str(err.value) and err.value.exit_code == 2 and "\n" not in str(err.value)


def test_another_release_is_built_with_a_note(tmp_path):
    tree = checkout(tmp_path / "t", version="2.15.0a0")
    assert "is PyTorch 2.15.0a0, the recipe builds 2.14.1" in version_note(tree, "2.14.1")
    assert version_note(checkout(tmp_path / "u"), "2.14.1") is None
    assert "no version.txt" in version_note(checkout(tmp_path / "v", version=None), "2.14.1")


def test_a_develop_folder_of_another_checkout_is_refused(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "develop.json").write_text('{"source": "/elsewhere/pytorch"}')
    check_folder(folder, Path("/elsewhere/pytorch"), "cpu_job", "3.12")
    with pytest.raises(LocalBuildError, match="holds the build of /elsewhere/pytorch, not /mine"):
        check_folder(folder, Path("/mine"), "cpu_job", "3.12")
    (folder / "develop.json").write_text('{"source": "/src", "config": "cpu_job", "python": "3.12"}')
    check_folder(folder, Path("/src"), "cpu_job", "3.12")
    with pytest.raises(LocalBuildError, match="holds a build for cpu_job and Python 3.12, not cuda_job and 3.12"):
        check_folder(folder, Path("/src"), "cuda_job", "3.12")
    with pytest.raises(LocalBuildError, match="not cpu_job and 3.11"):
        check_folder(folder, Path("/src"), "cpu_job", "3.11")


def test_the_python_is_one_of_the_configs_and_defaults_to_its_newest(tmp_path):
    from localbuild.configs import load_config

    config = load_config(make_feedstock(tmp_path).root, CPU)
    assert choose_python(config, ()) == ("3.14", "the config's newest; --python X.Y chooses another")
    assert choose_python(config, ("3.11",)) == ("3.11", "--python")
    with pytest.raises(LocalBuildError, match="builds 3.10, 3.11"):
        choose_python(config, ("3.99",))
    with pytest.raises(LocalBuildError, match="one Python; 2 given"):
        choose_python(config, ("3.11", "3.12"))


def test_the_cli_refuses_flags_develop_does_not_take_and_writes_nothing(tmp_path):
    fs = make_feedstock(tmp_path)
    root = fs.root
    tree = checkout(tmp_path / "pytorch")
    for extra, says in ((["--upload"], "--develop does not combine with --upload"),
                        (["--test-only"], "--develop does not combine with --test-only"),
                        (["--tool", "conda-build"], "drop --tool conda-build"),
                        (["--python", "3.99"], "--python 3.99: ")):
        proc = fs.run(CPU, "--develop", str(tree), *extra)
        assert proc.returncode == 2 and says in proc.stderr, (extra, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
    proc = fs.run(CPU, "linux_64_blas_implmklcuda_compiler_versionNone", "--develop", str(tree))
    assert proc.returncode == 2 and "--develop builds one config; 2 given" in proc.stderr, proc.stderr
    proc = fs.run(CPU, "--shell")
    assert proc.returncode == 2 and "give --develop too" in proc.stderr
    assert not (root / "build_artifacts").exists()


def test_the_dry_run_names_the_folder_the_environment_to_make_and_the_variables(tmp_path):
    fs = make_feedstock(tmp_path)
    root = fs.root
    tree = checkout(tmp_path / "pytorch", version="2.15.0a0")
    proc = fs.run(CPU, "--develop", str(tree), "--python", "3.12",
                                                                  "--dry-run", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    folder = root / "build_artifacts" / "develop" / f"{CPU}-3.12"
    for line in (f"develop:      {tree}", "  python:     3.12 (--python)", f"  folder:     {folder}",
                 "not made yet", "(none yet: the first run configures it)", f"  DEVELOP_SOURCE={tree}",
                 f"  DEVELOP_DIR={folder}"):
        assert line in proc.stdout, (line, proc.stdout)
    assert not (root / "build_artifacts").exists()


def test_an_environment_is_stale_for_each_reason_and_says_it():
    stale = _in_location().stale_reasons
    new = {"specs": ["python 3.12.*", "cmake >=3.27,<5"], "channels": {"/c": "abc"}, "location": "natively"}
    assert stale({}, new) == ["no environment yet"]
    assert stale({**new, "complete": False}, new) == ["the last environment build did not finish"]
    assert stale({**new, "complete": True}, new) == []
    assert stale({**new, "complete": True, "specs": ["python 3.12.*", "cmake"]}, new) == [
        "the recipe's requirements changed (+cmake >=3.27,<5, -cmake)"]
    assert stale({**new, "complete": True, "channels": {"/c": "old"}}, new) == ["channel /c changed"]
    assert stale({**new, "complete": True, "location": "in a container"}, new) == [
        "it was made in a container, this build runs natively"]


def test_the_variant_pins_bare_names_as_rattler_build_does():
    pinned = _in_location()._pinned
    variant = {"python": "3.12.* *_cpython", "numpy": "2", "libprotobuf": "7.35.1"}
    assert pinned("python", variant) == "python 3.12.* *_cpython"
    assert pinned("numpy", variant) == "numpy 2.*"
    assert pinned("libprotobuf", variant) == "libprotobuf 7.35.1.*"   # a series, as conda reads a bare version
    assert pinned("cmake >=3.27,<5", variant) == "cmake >=3.27,<5" and pinned("ninja", variant) == "ninja"


def test_recompiled_objects_come_from_the_ninja_logs_last_lines(tmp_path):
    log = tmp_path / ".ninja_log"
    log.write_text("# ninja log v6\n0\t5\t100\ta.o\th1\n0\t5\t100\tb.o\th2\n0\t1\t100\tlib.so\th3\n")
    before = last_entries(tmp_path)
    assert recompiled({}, before).count == 2 and recompiled({}, before).total == 2
    with log.open("a") as f:
        f.write("0\t7\t200\tb.o\th2\n0\t2\t200\tlib.so\th3\n")
    again = recompiled(before, last_entries(tmp_path))
    assert again.objects == ("b.o",) and again.total == 2
    assert last_entries(tmp_path / "none") == {}


def test_the_environment_comes_before_the_system_and_runs_what_it_linked():
    prefix = Path("/env")
    env = develop_environment({"CXXFLAGS": "-O2", "LDFLAGS": "-Wl,-O2", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
                               "CMAKE_PREFIX_PATH": "/opt/other"}, prefix)
    assert env["CXXFLAGS"] == "-isystem /env/include -O2" and env["CFLAGS"] == "-isystem /env/include"
    assert env["LDFLAGS"].split()[:2] == ["-L/env/lib", "-Wl,-rpath,/env/lib"]
    assert env["LD_LIBRARY_PATH"] == "/env/lib" and env["CMAKE_PREFIX_PATH"] == "/env:/opt/other"
    assert develop_environment(env, prefix) == env   # applied twice: the same
    rocm = develop_environment({"ROCM_PATH": "/opt/rocm"}, prefix)
    assert rocm["LD_LIBRARY_PATH"] == "/env/lib:/opt/rocm/lib"
    script = variables_script({"A": "1", "B": "two words"}, {"A": "1"})
    assert "export B='two words'" in script and "export A" not in script


def test_native_without_py_rattler_is_one_line_before_anything_is_written(tmp_path):
    fs = make_feedstock(tmp_path)
    (fs.root / "recipe" / "recipe.yaml").write_text("# the stub feedstock's: checked to exist first\n")
    tree = checkout(tmp_path / "pytorch")
    proc = fs.run(CPU, "--native", "--develop", str(tree), "--min-free-gb", "0",
                  env=fs.env(RATTLER_BUILD_PYTHON="/bin/false"))   # a "Python" that imports nothing
    assert proc.returncode == 3, proc.stderr
    assert "cannot import rattler and rattler_build" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (fs.root / "build_artifacts" / "develop").exists()
