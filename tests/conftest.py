"""Shared test fixtures: where the real data lives and which real tools this machine has.

Every fixture that needs something the machine may lack skips with the reason.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# real data the tests need, kept in the project so a fresh clone runs every test
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"
TORCH_WHEEL_VERSION = "2.13.0"

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
RECIPE_DIR = REPO_ROOT / "recipe"
if str(RECIPE_DIR) not in sys.path:
    # the driver package lives in recipe/ because conda-build copies that folder into RECIPE_DIR
    sys.path.insert(0, str(RECIPE_DIR))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def pytorch_cmakecache_dir() -> Path:
    """The real PyTorch CMakeCache.txt files (one per Python) in tests/fixtures."""
    path = FIXTURES_DIR / "pytorch-cmakecache"
    if not (path / "CMakeCache.py311.txt").is_file() or not (path / "CMakeCache.py312.txt").is_file():
        pytest.skip(f"real PyTorch CMakeCache fixtures not found under {path}")
    return path


def find_cpythons(min_version: tuple[int, int] = (3, 10)) -> dict[str, Path]:
    """Every CPython >= min_version on this machine: pyenv's versions and python3.X on PATH.

    Returns {"3.11": Path(interpreter)}, one interpreter per minor version, resolved to a real file.
    """
    found: dict[str, Path] = {}
    candidates: list[str] = []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(glob.glob(str(pyenv_root / "versions" / "*" / "bin" / "python3.*")))
    for minor in range(min_version[1], 20):
        exe = shutil.which(f"python3.{minor}")
        if exe:
            candidates.append(exe)
    for exe in candidates:
        if not re.search(r"python3\.\d+$", exe) or not os.access(exe, os.X_OK):
            continue
        try:
            out = subprocess.run(
                [exe, "-c", "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); "
                 "print(sys.executable); print(int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))"],
                capture_output=True, text=True, timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode != 0:
            continue
        version, executable, freethreaded = out.stdout.split()
        if freethreaded == "1":
            continue
        if tuple(int(x) for x in version.split(".")) < min_version:
            continue
        found.setdefault(version, Path(executable).resolve())
    return dict(sorted(found.items(), key=lambda kv: tuple(int(x) for x in kv[0].split("."))))


@pytest.fixture(scope="session")
def cpythons() -> dict[str, Path]:
    """At least two CPythons (3.10+), or skip."""
    found = find_cpythons()
    if len(found) < 2:
        pytest.skip(f"need at least two CPython versions >= 3.10, found {sorted(found) or 'none'}")
    return found


@pytest.fixture(scope="session")
def torch_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real PyTorch 2.13.0 CPU wheel for CPython 3.11, copied from pip's offline cache."""
    cached = os.environ.get("TORCH_WHEEL")
    if cached and Path(cached).is_file():
        return Path(cached)
    import megabuild_harness  # the download lives there, for the benchmark scripts too
    try:
        return megabuild_harness.download_torch_wheel(tmp_path_factory.mktemp("torch-wheel"),
                                                      TORCH_WHEEL_VERSION)
    except megabuild_harness.HarnessUnavailable as exc:
        pytest.skip(str(exc))


# --- maintainer tooling (python -m feedstock): temp copies of the real feedstock ---------------

FEEDSTOCK_INPUTS = ("recipe", "pinning.yaml", "conda-forge.yml", ".ci_support", ".github")


@pytest.fixture
def feedstock_copy(tmp_path: Path) -> Path:
    """A copy of the real recipe, pinning, conda-forge.yml and .ci_support/ to break on purpose."""
    dest = tmp_path / "feedstock"
    dest.mkdir()
    for name in FEEDSTOCK_INPUTS:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            shutil.copy2(src, dest / name)
    return dest


def run_feedstock_cli(*args: str, root: Path = REPO_ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m feedstock --feedstock-root ROOT ARGS`` as a user runs it (real process)."""
    return subprocess.run(
        [sys.executable, "-m", "feedstock", "--feedstock-root", str(root), *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, **(env or {})},
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file directly in ``folder``, name -> bytes (to assert a command wrote nothing)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# --- real conda packages (tests/realbuild): one local toolchain channel per session -------------

REALBUILD_CPU_JOB = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
REALBUILD_PYTHONS = ("3.11", "3.12")  # 3.12 is also the recipe's split_python; the wheel is cp311


@pytest.fixture(scope="session")
def realbuild_toolchain(tmp_path_factory: pytest.TempPathFactory, cpythons: dict[str, Path]) -> dict:
    """The local toolchain channel (tests/realbuild/toolchain.py) for the cpu job and both
    Pythons, plus the recipe copy (source: the PyTorch-shaped test project) it was built for.

    Keys: work, toolchain, recipe, versions, variant(pythons, dest) -> job variant file."""
    pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")
    pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")
    from tests.realbuild.feedstock_build import copy_recipe, prepare_project_source
    from tests.realbuild.session import machine_ready, machine_variant
    from tests.realbuild.toolchain import ToolchainUnavailable, build_toolchain_channel

    missing = [v for v in REALBUILD_PYTHONS if v not in cpythons]
    if missing:
        pytest.skip(f"the real build needs CPython {', '.join(missing)} (pyenv)")
    try:
        versions = machine_ready()
    except ToolchainUnavailable as err:
        pytest.skip(str(err))
    work = tmp_path_factory.mktemp("realbuild")

    def variant(pythons: tuple[str, ...], dest: Path, job: str = REALBUILD_CPU_JOB) -> Path:
        return machine_variant(job, pythons, versions, dest)

    recipe = copy_recipe(work / "recipe", prepare_project_source(work / "source"))
    cpu_variant = variant(REALBUILD_PYTHONS, work / "variants" / f"{REALBUILD_CPU_JOB}.yaml")
    try:
        toolchain = build_toolchain_channel(work / "toolchain", {v: cpythons[v] for v in REALBUILD_PYTHONS},
                                            recipe, [cpu_variant])
    except ToolchainUnavailable as err:
        pytest.skip(str(err))
    return {"work": work, "toolchain": toolchain, "recipe": recipe, "versions": versions,
            "variant": variant, "cpu_variant": cpu_variant}
