"""The libtorch / pytorch split layout, end to end, on the real PyTorch 2.13.0 CPU wheel.

The driver's real steps run (split -> libtorch -> pytorch, dispatched on PKG_NAME as the recipe
does) with a Frontend that unpacks the wheel instead of compiling PyTorch. The prefix is a
virtual environment made from CPython 3.11, shaped like a conda environment. Then the prefix is
used the way users use it: import torch, pip, find_package(Torch), a cpp_extension build.

Everything expensive is built once per module; the whole module takes a few minutes on 2 cores
(README section layout-tests has the numbers).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from megabuild.staging import is_loaded_by_path
from tests.support.ccache_launch import cmake_ccache
from tests.support.paths import REPO_ROOT, TORCH_WHEEL_VERSION
from tests.support.pythons import find_cpythons
from tests.support.scratch import module_scratch
from tests.support.real_wheel.build_cache import read_cache
from tests.support.real_wheel.prefix import (Snapshot, changed_or_removed, create_prefix, new_paths, site_packages,
                                 snapshot)
from tests.support.real_wheel.recipe_tests import RecipeTests, recipe_tests
from tests.support.real_wheel.wheel_frontend import (RETARGETED_KEYS, WheelFrontend, free_bytes, patch_for_wheel,
                                         patch_targets, recipe_patches, unpack_size, wheel_path)

pytestmark = [pytest.mark.compile, pytest.mark.download]

LAYOUT_DIR = REPO_ROOT / "tests" / "support" / "real_wheel"
PREFIX_REQUIREMENTS = LAYOUT_DIR / "prefix-requirements.txt"
# a missing pin file is this repository's bug, not a machine without PyPI: fail, never skip
assert PREFIX_REQUIREMENTS.is_file(), PREFIX_REQUIREMENTS
CMAKE_TEST_DIR = REPO_ROOT / "recipe" / "cmake_test"
META_YAML = REPO_ROOT / "recipe" / "meta.yaml"
LIBTORCH_DIRS = ("bin", "lib", "include", "share")  # what libtorch installs and pytorch links to

# conda-build exports these for a linux-64 CPU, generic-BLAS megabuild (see .ci_support/)
VARIANT = {
    "PKG_VERSION": TORCH_WHEEL_VERSION,
    "PKG_BUILDNUM": "0",
    "cuda_compiler_version": "None",
    "blas_impl": "generic",
    "use_magma": "false",
    "megabuild": "true",
    "target_platform": "linux-64",
    "CPU_COUNT": "2",
}
SPLIT_OUTPUT, LIBTORCH_OUTPUT, PYTORCH_OUTPUT = "libtorch-split", "libtorch", "pytorch"


@dataclass
class SplitLayout:
    """The prefix after the three steps, and what each step added to it."""

    prefix: Path
    python: Path
    sp_dir: Path
    src_dir: Path
    frontend: WheelFrontend
    snapshots: dict[str, Snapshot] = field(default_factory=dict)  # "before", then after each step
    # the recipe's `test ...` commands per output, with their exit codes, evaluated right after
    # that output's step (the state conda-build tests the output in)
    file_checks: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def added_by(self, step: str) -> set[str]:
        order = ["before", SPLIT_OUTPUT, LIBTORCH_OUTPUT, PYTORCH_OUTPUT]
        return new_paths(self.snapshots[order[order.index(step) - 1]], self.snapshots[step])

    @property
    def sp_rel(self) -> str:
        return self.sp_dir.relative_to(self.prefix).as_posix()

    def test_env(self, **extra: str) -> dict[str, str]:
        """The environment of conda-build's test phase: the prefix's bin first, PREFIX, SP_DIR."""
        return clean_env(PATH=f"{self.prefix / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                         PREFIX=str(self.prefix), SP_DIR=str(self.sp_dir), **extra)

    def in_prefix(self, path: str) -> str:
        """A recipe path (`$PREFIX/lib/x`, `$SP_DIR/torch/y`) relative to the prefix."""
        for var, rel in (("$PREFIX/", ""), ("$SP_DIR/", self.sp_rel + "/")):
            if path.startswith(var):
                return rel + path[len(var):]
        raise ValueError(f"recipe path {path!r} is not under $PREFIX or $SP_DIR")


@pytest.fixture(scope="module")
def recipe(torch_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RecipeTests]:
    """The recipe's tests as rendered for the wheel's release: a feedstock copy bumped back to
    it (the recipe itself may be newer than the cached 2.13.0 wheel)."""
    from tests.realbuild.feedstock_build import bumped_feedstock

    version = torch_wheel.name.split("-")[1].split("+")[0]
    root, _ = bumped_feedstock(tmp_path_factory.mktemp("recipe-at-wheel"), torch_wheel, version)
    return {name: recipe_tests(root, name, python="3.11")
            for name in (LIBTORCH_OUTPUT, PYTORCH_OUTPUT)}


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without what would leak our interpreter into the prefix's."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    env.update(extra)
    return env


def run(cmd: list, *, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: int = 600) -> subprocess.CompletedProcess:
    """Run cmd; on failure raise with its output tail, so the pytest report says what went wrong."""
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or clean_env(), timeout=timeout,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise AssertionError(f"{' '.join(str(c) for c in cmd)} exited {proc.returncode}:\n{tail}")
    return proc


def build_context(pkg_name: str, *, src_dir: Path, prefix: Path, python: Path, build_prefix: Path):
    """A BuildContext made the way the recipe makes it: from conda-build's environment variables."""
    from megabuild.context import BuildContext

    py = run([python, "-c", "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); "
                            "print(sysconfig.get_paths()['platlib'])"]).stdout.split()
    environ = clean_env(**VARIANT, PKG_NAME=pkg_name, SRC_DIR=str(src_dir), PREFIX=str(prefix),
                        BUILD_PREFIX=str(build_prefix), RECIPE_DIR=str(REPO_ROOT / "recipe"),
                        PYTHON=str(python), PY_VER=py[0], SP_DIR=py[1])
    return BuildContext.from_environ(environ)


@pytest.fixture(scope="module")
def layout(request: pytest.FixtureRequest, torch_wheel: Path, pytorch_cmakecache_dir: Path, recipe: dict[str, RecipeTests],
           tmp_path_factory: pytest.TempPathFactory) -> SplitLayout:
    from megabuild import steps

    _need_tools("patch")  # the recipe's patches are applied to the wheel's files
    pythons = find_cpythons()
    if "3.11" not in pythons:
        pytest.skip(f"the torch wheel is cp311 and no CPython 3.11 was found (have {sorted(pythons)})")
    work = module_scratch(request, tmp_path_factory, "layout")
    needed = 4 * unpack_size(torch_wheel)  # build tree, stage, prefix, pip's unpack
    if free_bytes(work) < needed:
        pytest.skip(f"needs {needed >> 30} GiB free under {work}, have {free_bytes(work) >> 30} GiB")

    # The split step builds with one fixed Python (another minor version when there is one, so
    # that retargeting the cache to the prefix's 3.11 is a real change); a virtual environment,
    # like the interpreters the fixture caches were configured with.
    build_version = "3.12" if "3.12" in pythons else "3.11"
    build_env = work / "build-env"
    run([pythons[build_version], "-m", "venv", "--without-pip", build_env])
    build_python = build_env / "bin" / "python"

    prefix = create_prefix(pythons["3.11"], work / "prefix")
    python = prefix / "bin" / "python"
    # numpy (a host requirement) and torch's runtime dependencies, as conda-build's host and test
    # environments would have them; installed before the "before" snapshot, so outside the outputs
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", "-r", PREFIX_REQUIREMENTS],
                          env=clean_env(), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        pytest.skip(f"cannot install {PREFIX_REQUIREMENTS.name} from PyPI into the prefix: {last}")
    src_dir = work / "src"
    src_dir.mkdir()
    frontend = WheelFrontend(torch_wheel, pytorch_cmakecache_dir, recipe_patches(META_YAML))
    result = SplitLayout(prefix, python, site_packages(python), src_dir, frontend)
    result.snapshots["before"] = snapshot(prefix)
    for pkg_name, step_python in ((SPLIT_OUTPUT, build_python), (LIBTORCH_OUTPUT, build_python),
                                  (PYTORCH_OUTPUT, python)):
        ctx = build_context(pkg_name, src_dir=src_dir, prefix=prefix, python=step_python,
                            build_prefix=build_env)
        steps.run_step(ctx, frontend)
        result.snapshots[pkg_name] = snapshot(prefix)
        if pkg_name in recipe:
            result.file_checks[pkg_name] = [
                (command, subprocess.run(["bash", "-c", command], env=result.test_env()).returncode)
                for command in recipe[pkg_name].file_checks]
    return result


# -- what each output contains -------------------------------------------------------------------

def test_split_step_only_stages(layout: SplitLayout) -> None:
    assert layout.added_by(SPLIT_OUTPUT) == set(), "the split step must stage, not install"
    assert changed_or_removed(layout.snapshots["before"], layout.snapshots[SPLIT_OUTPUT]) == set()


@pytest.mark.parametrize("output", [LIBTORCH_OUTPUT, PYTORCH_OUTPUT])
def test_output_contains_what_the_recipe_tests(layout: SplitLayout, recipe: dict[str, RecipeTests],
                                               output: str) -> None:
    expected = recipe[output].expected_files()
    assert expected, f"recipe/meta.yaml's {output} test lists no files ({recipe[output].config})"
    installed = layout.added_by(output)
    missing = [p for p in expected if not _covered(layout.in_prefix(p), installed)]
    assert not missing, f"{output}: the recipe tests for files its step did not install: {missing}"


@pytest.mark.parametrize("output", [LIBTORCH_OUTPUT, PYTORCH_OUTPUT])
def test_recipe_file_checks_pass(layout: SplitLayout, output: str) -> None:
    """The recipe's `test ...` commands, run by bash right after the output's step."""
    checks = layout.file_checks[output]
    assert checks, f"recipe/meta.yaml's {output} test has no file checks"
    failed = [command for command, rc in checks if rc != 0]
    assert not failed, f"{output}: recipe test commands fail on the driver's layout: {failed}"


def _covered(path: str, installed: set[str]) -> bool:
    """path is a file the step installed, or a directory holding some."""
    return path in installed or any(p.startswith(path.rstrip("/") + "/") for p in installed)


def test_libtorch_output_is_python_free(layout: SplitLayout) -> None:
    files = layout.added_by(LIBTORCH_OUTPUT)
    assert {"lib/libtorch_cpu.so", "lib/libc10.so", "lib/libtorch.so",
            "share/cmake/Torch/TorchConfig.cmake",
            "include/torch/csrc/api/include/torch/torch.h"} <= files
    assert not [f for f in files if "libtorch_python" in f], "libtorch_python belongs to pytorch"
    assert not [f for f in files if f.startswith("lib/python")], "libtorch must not touch site-packages"
    assert not [f for f in files if f.endswith(".pyc")]


def test_pytorch_output_has_libtorch_python_in_prefix_lib(layout: SplitLayout) -> None:
    files = layout.added_by(PYTORCH_OUTPUT)
    assert "lib/libtorch_python.so" in files
    assert (layout.prefix / "lib" / "libtorch_python.so").is_file()
    assert not (layout.prefix / "lib" / "libtorch_python.so").is_symlink()
    assert f"{layout.sp_rel}/torch/__init__.py" in files
    assert any(f.startswith(f"{layout.sp_rel}/torch-{TORCH_WHEEL_VERSION}") and f.endswith("/RECORD")
               for f in files), "pytorch must install torch's dist-info (pip relies on it)"


def test_pytorch_step_leaves_libtorch_files_alone(layout: SplitLayout) -> None:
    touched = changed_or_removed(layout.snapshots[LIBTORCH_OUTPUT], layout.snapshots[PYTORCH_OUTPUT])
    clobbered = sorted(touched & layout.added_by(LIBTORCH_OUTPUT))
    assert not clobbered, f"the pytorch step changed files that libtorch owns: {clobbered[:10]}"


def test_site_packages_links_into_prefix(layout: SplitLayout) -> None:
    lib = layout.sp_dir / "torch" / "lib" / "libtorch_cpu.so"
    assert lib.is_symlink(), f"{lib} must be a symlink into $PREFIX/lib"
    assert lib.resolve() == (layout.prefix / "lib" / "libtorch_cpu.so").resolve()
    # every entry libtorch installs is reached from site-packages/torch through a link, never a
    # copy, but for the library torch/__init__.py dlopens by path: its $ORIGIN must be a real folder
    kept = layout.sp_dir / "torch" / "lib" / "libtorch_global_deps.so"
    assert kept.is_file() and not kept.is_symlink(), f"{kept} must stay a real file (staging.is_loaded_by_path)"
    libtorch = {p for p in layout.added_by(LIBTORCH_OUTPUT) if p.split("/", 1)[0] in LIBTORCH_DIRS}
    copies, wrong, absolute = [], [], []
    for rel in sorted(libtorch):
        in_torch = layout.sp_dir / "torch" / rel
        if not os.path.lexists(in_torch):
            continue  # pytorch need not carry every libtorch file (e.g. test binaries)
        if not _through_symlink(in_torch, layout.sp_dir / "torch"):
            if not is_loaded_by_path(in_torch.name):
                copies.append(rel)
            continue
        elif in_torch.resolve() != (layout.prefix / rel).resolve():
            wrong.append(f"{rel} -> {in_torch.resolve()}")
        elif in_torch.is_symlink() and os.path.isabs(os.readlink(in_torch)):
            absolute.append(rel)
    assert not copies, f"site-packages/torch has copies of libtorch files: {copies[:10]}"
    assert not wrong, f"site-packages/torch links point elsewhere: {wrong[:10]}"
    assert not absolute, f"absolute links make the package unrelocatable: {absolute[:10]}"


def _through_symlink(path: Path, top: Path) -> bool:
    """path, or a folder between it and top, is a symlink."""
    while path != top:
        if path.is_symlink():
            return True
        path = path.parent
    return False


def test_no_library_present_twice(layout: SplitLayout) -> None:
    seen: dict[str, list[str]] = {}
    for rel, entry in layout.snapshots[PYTORCH_OUTPUT].items():
        name = rel.rsplit("/", 1)[-1]
        if not entry.is_symlink and (name.endswith(".so") or ".so." in name):
            seen.setdefault(name, []).append(rel)
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    # the one deliberate second copy: a few KB that torch/__init__.py dlopens by path
    assert sorted(twice) == ["libtorch_global_deps.so"], f"libraries installed twice as regular files: {twice}"


def test_no_bytecode_of_another_python(layout: SplitLayout) -> None:
    foreign = sorted(p for p in layout.added_by(PYTORCH_OUTPUT)
                     if p.endswith(".pyc") and ".cpython-311" not in p)
    assert not foreign, f"pytorch for 3.11 ships bytecode of another Python: {foreign[:10]}"


def test_recipe_patches_reach_the_installed_package(layout: SplitLayout, tmp_path: Path) -> None:
    """Every recipe patch to a file the package ships (torch/utils/cpp_extension.py...) is installed."""
    patches = recipe_patches(META_YAML)
    shipped = [p for p in patches
               if all((layout.sp_dir / wheel_path(t)).exists() for t in patch_targets(p))]
    assert layout.frontend.patched == [p.name for p in shipped]
    assert set(layout.frontend.unpatched) == {p.name for p in patches} - set(layout.frontend.patched)
    for patch in shipped:  # in the installed files (headers through their symlinks into $PREFIX):
        check = Path(tempfile.mkdtemp(prefix="reverse-", dir=tmp_path))
        for target in patch_targets(patch):
            installed = wheel_path(target)
            (check / installed).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile((layout.sp_dir / installed).resolve(), check / installed)
        # it reverses cleanly there (-f: never re-apply)
        proc = subprocess.run(["patch", "-p1", "-R", "-f", "--dry-run", "-s", "-d", str(check)],
                              input=patch_for_wheel(patch), capture_output=True, text=True)
        assert proc.returncode == 0, (patch.name, proc.stdout)


def test_cache_retargeted_before_install(layout: SplitLayout) -> None:
    """What `pip install .` would have compiled against: the prefix's interpreter, not the split's."""
    assert len(layout.frontend.installs) == 1
    seen = layout.frontend.installs[0]["cache"]
    include = run([layout.python, "-c",
                   "import sysconfig; print(sysconfig.get_paths()['include'])"]).stdout.strip()
    assert seen == {
        "Python_EXECUTABLE": str(layout.python),
        "PYBIND11_PYTHON_EXECUTABLE_LAST": str(layout.python),
        "PYTHON_MODULE_EXTENSION": ".cpython-311-x86_64-linux-gnu.so",
        "_Python_INCLUDE_DIR": include,
    }, seen
    assert set(seen) == set(RETARGETED_KEYS)
    assert layout.frontend.installs[0]["record"] is None  # FindPython's record, left for CMake to write


# -- using the prefix ----------------------------------------------------------------------------

def test_import_torch_and_run_a_tensor_op(layout: SplitLayout) -> None:
    code = ("import torch, json; t = torch.arange(6.).reshape(2, 3); "
            "print(json.dumps([torch.__version__, (t @ t.T).tolist(), torch.__file__]))")
    version, product, torch_file = json.loads(run([layout.python, "-c", code]).stdout)
    assert version == f"{TORCH_WHEEL_VERSION}+cpu"
    assert product == [[5.0, 14.0], [14.0, 50.0]]
    assert Path(torch_file).parent == layout.sp_dir / "torch"


def test_pip_check_is_clean(layout: SplitLayout) -> None:
    out = run([layout.python, "-m", "pip", "check"]).stdout
    assert "No broken requirements found" in out


def test_recipe_runtime_commands_pass(layout: SplitLayout, recipe: dict[str, RecipeTests]) -> None:
    """The pytorch output's imports and runtime commands (python, pip, torchrun) pass."""
    tests = recipe[PYTORCH_OUTPUT]
    commands = [f"python -c 'import {name}'" for name in tests.imports] + tests.runtime_commands
    assert commands, "recipe/meta.yaml's pytorch test runs no Python"
    failed = []
    for command in commands:
        proc = subprocess.run(["bash", "-c", command], env=layout.test_env(), capture_output=True,
                              text=True, timeout=300, cwd=layout.prefix)
        if proc.returncode != 0:
            failed.append(f"{command}: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    assert not failed, "recipe test commands fail:\n" + "\n".join(failed)


def test_pip_sees_the_installed_torch(layout: SplitLayout, tmp_path: Path) -> None:
    """A package that requires torch==2.13.0 installs nothing else: no torch download planned."""
    report = tmp_path / "report.json"
    run([layout.python, "-m", "pip", "install", "--dry-run", "--no-build-isolation",
         "--report", report, LAYOUT_DIR / "needs_torch"])
    planned = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert planned == ["needs-torch"], f"pip plans to install {planned}"
    out = run([layout.python, "-m", "pip", "install", "--dry-run",
               f"torch=={TORCH_WHEEL_VERSION}"]).stdout
    assert "Requirement already satisfied: torch" in out
    assert "Would install" not in out


def _need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} on PATH")


@pytest.mark.parametrize("how", ["CMAKE_PREFIX_PATH", "Torch_DIR"])
def test_cmake_find_package_torch(layout: SplitLayout, tmp_path: Path, how: str) -> None:
    """The recipe's cmake_test (with torch_python), found through $PREFIX and through site-packages."""
    _need_tools("cmake", "ninja", "c++")
    prefix_torch_dir = layout.prefix / "share" / "cmake" / "Torch"
    sp_torch_dir = layout.sp_dir / "torch" / "share" / "cmake" / "Torch"
    where, torch_dir, torch_python = {
        "CMAKE_PREFIX_PATH": (f"-DCMAKE_PREFIX_PATH={layout.prefix}", prefix_torch_dir,
                              layout.prefix / "lib" / "libtorch_python.so"),
        "Torch_DIR": (f"-DTorch_DIR={sp_torch_dir}", sp_torch_dir,
                      layout.sp_dir / "torch" / "lib" / "libtorch_python.so"),
    }[how]
    build = tmp_path / "build"
    # the project beside its build: every path ccache hashes lies below the run's folder, so the
    # next run (another clone, another pytest-N) is served the objects
    project = tmp_path / "cmake_test"
    shutil.copytree(CMAKE_TEST_DIR, project)
    launcher = cmake_ccache(build, layout.prefix, project)
    env = layout.test_env(**launcher.env)
    # no CMAKE_BUILD_TYPE: unoptimised compiles of the torch headers are the quickest
    run(["cmake", "-S", project, "-B", build, "-G", "Ninja", "-DWITH_TORCH_PYTHON=ON",
         f"-DPython3_EXECUTABLE={layout.python}", where, *launcher.defines], env=env)
    cache = read_cache(build / "CMakeCache.txt")
    assert Path(cache["Torch_DIR"]) == torch_dir
    assert Path(cache["TORCH_PYTHON_LIBRARY"]) == torch_python
    run(["cmake", "--build", build, "-j", "2"], env=env, timeout=900)
    assert launcher.compiled() is None or launcher.compiled() >= 2  # main.cpp and ext.cpp, through the launcher
    assert "torch_smoke OK" in run([build / "torch_smoke"], env=env).stdout
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import torch_smoke_ext; "
            "print(float(torch_smoke_ext.scaled_sum(torch.ones(4), 2.5)))")
    assert run([layout.python, "-c", code, build], env=env).stdout.strip() == "10.0"


def test_cpp_extension_builds_against_the_split_layout(layout: SplitLayout, tmp_path: Path) -> None:
    """A downstream CppExtension (as apex or flash-attn are built on HPC systems) builds and runs."""
    _need_tools("c++")
    paths = json.loads(run([layout.python, "-c",
                            "import json, torch.utils.cpp_extension as c; "
                            "print(json.dumps([c.include_paths(), c.library_paths()]))"]).stdout)
    include_paths, library_paths = paths
    header = Path(include_paths[0]) / "torch" / "extension.h"
    assert header.is_file(), f"cpp_extension.include_paths() has no torch/extension.h: {include_paths}"
    assert header.resolve() == (layout.prefix / "include" / "torch" / "extension.h").resolve(), \
        "the headers extensions compile against must be libtorch's"
    # torch/extension.h includes pybind11, which torch/include lacks when built with the system's
    assert any((Path(p) / "pybind11" / "pybind11.h").is_file() for p in include_paths), \
        f"no pybind11 headers on torch.utils.cpp_extension.include_paths(): {include_paths}"
    libs = [Path(p) / "libtorch_cpu.so" for p in library_paths if (Path(p) / "libtorch_cpu.so").exists()]
    assert libs and libs[0].resolve() == (layout.prefix / "lib" / "libtorch_cpu.so").resolve(), \
        library_paths
    src = tmp_path / "downstream_ext"
    shutil.copytree(LAYOUT_DIR / "downstream_ext", src)
    # CFLAGS come after Python's own -O3 -g: unoptimised compiles of the torch headers are quicker
    run([layout.python, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
         "--no-index", src], env=clean_env(MAX_JOBS="2", CFLAGS="-O0 -g0"), timeout=900)
    code = ("import torch, layout_ext; "
            "print(layout_ext.scaled_add(torch.ones(3), torch.arange(3.), 2.0).tolist())")
    assert json.loads(run([layout.python, "-c", code]).stdout) == [1.0, 3.0, 5.0]
