"""Shared test fixtures: where the real data lives and which real tools this machine has.

Every fixture that needs something the machine may lack skips with the reason. Plain helpers
live in tests/support/ (import them from there, never from this file).
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

_REPO_ROOT = Path(__file__).resolve().parent.parent
for _path in (_REPO_ROOT, _REPO_ROOT / "recipe"):
    # the driver package lives in recipe/ because conda-build copies that folder into RECIPE_DIR
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tests.support.feedstock_copy import copy_feedstock  # noqa: E402
from tests.support.paths import CPU_GENERIC_JOB, FIXTURES_DIR, REPO_ROOT, TORCH_WHEEL_VERSION  # noqa: E402
from tests.support.pythons import find_cpythons  # noqa: E402


@pytest.fixture(autouse=True)
def ctrl_c_as_usual():
    """Every test starts with Ctrl-C delivered and raising KeyboardInterrupt, and child
    processes inherit that: a test that ignores or blocks SIGINT (the build runner ignores it
    while a container runs) must not make a later test's signal go nowhere. The same for a
    hangup: a suite started under nohup ignores SIGHUP, children inherit the ignoring, and the
    tests of what a hangup does would see nothing happen."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    hangup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    signal.signal(signal.SIGHUP, hangup if hangup is not None else signal.SIG_DFL)


@pytest.fixture(scope="session", autouse=True)
def torch_caches_in_the_run(tmp_path_factory: pytest.TempPathFactory):
    """torch.compile's and Triton's caches (which the real torch wheels fill) go into the run's
    folder, not /tmp/torchinductor_$USER: CI's /tmp is shared and must be left as found."""
    variables = (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton"))
    if all(os.environ.get(variable) for variable, _ in variables):
        yield   # a pytest run inside a test inherits the outer run's: no folder of its own to leave
        return
    folder = tmp_path_factory.mktemp("torch-caches")
    for variable, name in variables:
        os.environ.setdefault(variable, str(folder / name))
    yield


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
    from tests.support import megabuild_harness  # the download lives there, for the benchmark scripts too
    try:
        return megabuild_harness.download_torch_wheel(tmp_path_factory.mktemp("torch-wheel"),
                                                      TORCH_WHEEL_VERSION)
    except megabuild_harness.HarnessUnavailable as exc:
        pytest.skip(str(exc))


CUDA_WHEEL_VERSION = "2.14.1"  # pip's local index holds its CUDA 13.0 cp311 build and the NVIDIA wheels


@pytest.fixture(scope="session")
def cuda_torch_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real PyTorch 2.14.1 CUDA 13.0 wheel for CPython 3.11 (pip's local index), or skip."""
    from tests.support import megabuild_harness
    from tests.support.real_wheel.cuda_wheel import wheel_cuda_version

    try:
        wheel = megabuild_harness.download_torch_wheel(tmp_path_factory.mktemp("cuda-wheel"), CUDA_WHEEL_VERSION)
    except megabuild_harness.HarnessUnavailable as exc:
        pytest.skip(str(exc))
    if wheel_cuda_version(wheel) != "13.0":
        pytest.skip(f"{wheel.name} is not the CUDA 13.0 build")
    return wheel


# --- maintainer tooling (python -m feedstock): temp copies of the real feedstock ---------------

@pytest.fixture
def feedstock_copy(tmp_path: Path) -> Path:
    """A copy of the real recipe, pinning, conda-forge.yml and .ci_support/ to break on purpose."""
    return copy_feedstock(tmp_path / "feedstock")


# --- real conda packages (tests/realbuild): one local toolchain channel per session -------------

REALBUILD_PYTHONS = ("3.11", "3.12")  # 3.12 is also the recipe's split_python; the wheel is cp311


@pytest.fixture(scope="session")
def realbuild_toolchain(tmp_path_factory: pytest.TempPathFactory, cpythons: dict[str, Path]) -> dict:
    """The local toolchain channel (tests/support/toolchain.py) for the cpu job and both
    Pythons, plus the recipe copy (source: the PyTorch-shaped test project) it was built for;
    built once for the run, whichever worker asks first (tests/support/shared_fixture.py).

    Keys: work, toolchain, recipe, versions, variant(pythons, dest) -> job variant file."""
    pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")
    pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")
    from tests.realbuild.feedstock_build import copy_recipe, prepare_project_source
    from tests.realbuild.session import machine_ready, machine_variant, patchelf_on_path
    from tests.support.machine_cache import cached_build, toolchain_key
    from tests.support.shared_fixture import build_once
    from tests.support.toolchain import ToolchainUnavailable, build_toolchain_channel

    def build(work: Path) -> dict:
        missing = [v for v in REALBUILD_PYTHONS if v not in cpythons]
        if missing:
            pytest.skip(f"the real build needs CPython {', '.join(missing)} (pyenv)")
        try:
            versions = machine_ready()
            # the recipe is 2.14+: its source is the test project's scikit-build-core form
            recipe = copy_recipe(work / "recipe", prepare_project_source(work / "source", "scikit-build-core"))
            cpu_variant = machine_variant(CPU_GENERIC_JOB, REALBUILD_PYTHONS, versions,
                                          work / "variants" / f"{CPU_GENERIC_JOB}.yaml")
            pythons = {v: cpythons[v] for v in REALBUILD_PYTHONS}
            # the channel once per machine: what it is made of is the recipe's requirements, the
            # pins and this machine's tools and interpreters
            toolchain = cached_build("toolchain", toolchain_key(versions, pythons),
                                     lambda entry: build_toolchain_channel(entry, pythons, recipe, [cpu_variant]))
        except ToolchainUnavailable as err:
            pytest.skip(str(err))
        return {"work": work, "toolchain": toolchain, "recipe": recipe, "versions": versions,
                "cpu_variant": cpu_variant}

    session = build_once(tmp_path_factory, "realbuild", build)
    patchelf_on_path()   # this worker's PATH too, when another worker built the channel

    def variant(pythons: tuple[str, ...], dest: Path, job: str = CPU_GENERIC_JOB) -> Path:
        return machine_variant(job, pythons, session["versions"], dest)

    return {**session, "variant": variant}


@pytest.fixture(scope="session")
def wheelbuild(torch_wheel: Path, pytorch_cmakecache_dir: Path, realbuild_toolchain: dict,
               tmp_path_factory: pytest.TempPathFactory) -> dict:
    """pytorch-cpu 2.13.0 from the real CPU wheel (a feedstock copy bumped back to 2.13.0), built by
    rattler-build and installed by rattler
    (tests/realbuild/real_packages.py): checked by tests/realbuild, imaged by tests/feedstock/after_build/image,
    depended on by tests/realbuild/test_dependents.py. Built once for the run."""
    from tests.realbuild.real_packages import cpu_wheel_packages
    from tests.support.shared_fixture import build_once
    from tests.support.toolchain import ToolchainUnavailable

    def build(_: Path) -> dict:
        try:
            return cpu_wheel_packages(realbuild_toolchain, torch_wheel, pytorch_cmakecache_dir)
        except ToolchainUnavailable as err:
            pytest.skip(str(err))

    return build_once(tmp_path_factory, "wheelbuild", build)


@pytest.fixture(scope="session")
def cuda_chain_ahead(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The NVIDIA and nvcc packages and the 3.13t interpreter, made before this worker waits on
    the toolchain channel (tests/support/ahead.py): a look at their caches on a warm machine.
    Returns what was made."""
    from tests.realbuild.session import patchelf_on_path
    from tests.support import ahead
    from tests.support.shared_fixture import build_once

    def build(work: Path) -> list[str]:
        try:
            patchelf_on_path()   # rattler-build relinks the NVIDIA libraries with it
            # the 3.13t interpreter last: the free-threaded modules need it much later, and it
            # fills what is left of the wait on the CPU chain's toolchain build
            return [name for name, make in (("nvidia", ahead.nvidia_packages), ("nvcc", ahead.nvcc_package),
                                            ("python3.13t", ahead.free_threaded_python)) if make(work)]
        except Exception as err:   # noqa: BLE001 - only a head start: the fixture that needs them
            # makes them again and fails there with its own error, in the test that needs them
            return [f"not made ahead: {type(err).__name__}: {err}"]

    return build_once(tmp_path_factory, "cuda-chain-ahead", build)


@pytest.fixture(scope="session")
def cudawheel(cuda_torch_wheel: Path, cuda_chain_ahead: list[str], pytorch_cmakecache_dir: Path,
              realbuild_toolchain: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """pytorch-gpu 2.14.1 (CUDA 13.0) from the real cu130 wheel, installed with __cuda=13.0.
    Built once for the run."""
    from tests.realbuild.real_packages import WrongNvcc, cuda_wheel_packages
    from tests.support.shared_fixture import build_once
    from tests.support.toolchain import ToolchainUnavailable

    def build(_: Path) -> dict:
        try:
            built = cuda_wheel_packages(realbuild_toolchain, cuda_torch_wheel, pytorch_cmakecache_dir)
        except (ToolchainUnavailable, WrongNvcc) as err:
            pytest.skip(str(err))
        return {key: value for key, value in built.items() if key != "records"}   # rattler's do not pickle

    import rattler

    shared = build_once(tmp_path_factory, "cudawheel", build)
    # the installed records, as rattler reads them back from the prefix
    records = [rattler.PrefixRecord.from_path(path)
               for path in sorted((shared["prefix"] / "conda-meta").glob("*.json"))]
    return {**shared, "records": records}



ROCM_PACKAGE_ARCH = "gfx90a;gfx1030"   # both known to Debian's HIP 5.2 clang (megabuild_harness.ROCM_TEST_ARCH)


@pytest.fixture(scope="session")
def rocmbuild(realbuild_toolchain: dict, torch_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The test project's ROCm 7.2 packages (libtorch, pytorch for 3.12, pytorch-rocm), built by
    rattler-build from the feedstock's recipe with this machine's hipcc for ROCM_PACKAGE_ARCH
    (tests/realbuild/rocm_job.py); skips without hipcc. Built once for the run.

    Keys: work, build, channels (built, toolchain), arch, python, variant, recipe."""
    from tests.realbuild.real_packages import keep_packages_only
    from tests.realbuild.rocm_job import rocm_packages, rocm_packages_key
    from tests.support.shared_fixture import build_once
    from tests.support.toolchain import ToolchainUnavailable

    def build(work: Path) -> dict:
        try:
            built = rocm_packages(realbuild_toolchain["toolchain"], realbuild_toolchain["versions"], torch_wheel,
                                  work, ROCM_PACKAGE_ARCH)
            keep_packages_only(built["build"].output_dir)
            return built
        except ToolchainUnavailable as err:
            pytest.skip(str(err))

    # the packages are the image module's input, not what it proves: once per machine and inputs
    return build_once(tmp_path_factory, "rocmbuild", build, machine_key=rocm_packages_key(
        realbuild_toolchain, torch_wheel, ROCM_PACKAGE_ARCH))


# --- two workers (pytest-xdist, `-n 2 --dist loadfile` in pytest.ini) -------------------------
# A test file runs whole on one worker, so a module's own fixtures are built once. What several
# files share (the toolchain channel, the real CPU and CUDA packages, the image rig) is built once
# for the run by whichever worker asks first; the other waits on a lock and loads the result
# (tests/support/shared_fixture.py). The files that build or use those packages go first, so
# both workers start on the long ones and the small files fill in around them. The fixtures ask
# for what does not need the toolchain channel first (the wheels, the image bases, the NVIDIA
# packages: tests/support/ahead.py), so on a fresh machine the worker that would wait for the
# channel makes those meanwhile.
# (xdist's loadgroup cannot be used: pytest 9 ignores the group suffix xdist 3.8 writes.)
# A test that a true skipif marks (a tool missing here) does not count: a file of such tests
# would take a turn and end at once, and its worker would then wait on the other's build instead
# of starting its own chain (seen: 20 minutes idle).
SHARED_PACKAGE_FIXTURES = {"realbuild_toolchain", "wheelbuild", "cudawheel", "rig", "rocmbuild"}
CUDA_FIXTURES = {"cudawheel"}


def _skipped_by_a_marker(item: pytest.Item) -> bool:
    return item.get_closest_marker("skip") is not None or any(
        mark.args and mark.args[0] is True for mark in item.iter_markers("skipif"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files that use the session's packages first, those of the CPU packages and those of
    the CUDA packages taking turns, so the two workers start one chain each (pytest.ini keeps
    this order: --no-loadscope-reorder)."""
    used: dict[str, set[str]] = {}
    for item in items:
        fixtures = () if _skipped_by_a_marker(item) else getattr(item, "fixturenames", ())
        used.setdefault(item.nodeid.split("::", 1)[0], set()).update(fixtures)
    cuda = [f for f in used if CUDA_FIXTURES & used[f]]
    cpu = [f for f in used if SHARED_PACKAGE_FIXTURES & used[f] and f not in cuda]
    turns = [f for pair in zip(cpu, cuda) for f in pair] + cpu[len(cuda):] + cuda[len(cpu):]
    rank = {f: i for i, f in enumerate(turns)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))   # stable otherwise


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In the xdist controller, once both workers are gone: unmount what a test left mounted in the
    run's folder (a podman overlay store), so that pytest can remove a passed run's folder whole.
    Without workers this would run before the session fixtures' own teardown, so it does not."""
    from tests.support.scratch import unmount_under

    factory = getattr(session.config, "_tmp_path_factory", None)
    basetemp = getattr(factory, "_basetemp", None)   # None when no test asked for a folder
    if hasattr(session.config, "workerinput") or not session.config.getoption("numprocesses", None) \
            or basetemp is None:
        return
    for stuck in unmount_under(basetemp):
        print(f"\nconftest: could not unmount {stuck}", file=sys.stderr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With FEEDSTOCK_TEST_TIMELINE=DIR, each worker appends when each phase of each test ended
    and how long it took to DIR/timeline-<worker>.jsonl: the schedule of a run, to see which
    worker waited on which shared fixture (docs/real-tool-checks.md, "Two workers")."""
    if getattr(report, "node", None) is not None:   # the controller's copy of a worker's report
        return
    from tests.support.shared_fixture import write_timeline

    write_timeline(test=report.nodeid, phase=report.when, seconds=round(report.duration, 2), outcome=report.outcome)
