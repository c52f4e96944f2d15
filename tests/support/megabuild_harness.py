"""Runs the megabuild driver for real on tests/support/megabuild_project (shared by tests and benchmark).

The conda build is simulated: every CPython gets its own virtual environment (created from
that interpreter, with setuptools, scikit-build-core and its dependencies pinned in
requirements-dev.txt: each environment has its own scikit-build-core, as each conda host
environment does) as `ctx.python`, and every output gets a fresh temporary folder as
`ctx.prefix`. The project comes in two forms (`FRONTENDS`): PyTorch's setup.py shape up to
2.13, and its scikit-build-core shape from 2.14 (pyproject.scikit-build.toml, no setup.py). Each compiler invocation is recorded by a
compiler launcher script (the same hook ccache uses), so tests can count what compiled when.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT_DIR = Path(__file__).resolve().parent / "megabuild_project"
if str(REPO_ROOT / "recipe") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "recipe"))

from megabuild.context import BuildContext  # noqa: E402
from tests.support.build_tools import NEWEST_CMAKE, BuildToolsUnavailable, tool_path  # noqa: E402
from megabuild.build_commands import run_command  # noqa: E402
from megabuild.frontend import (Frontend, SetupPyFrontend, check_frontend, configure_first,  # noqa: E402
                                layout_dir, select_frontend)
from megabuild.scikit_build import ScikitBuildCoreFrontend  # noqa: E402
from megabuild.source_prep import prepare_source  # noqa: E402
from megabuild.steps import run_step  # noqa: E402

CORE_TARGETS = ("c10", "torch_cpu", "flash_attention", "torch", "shm", "torch_shm_manager", "torch_cuda",
                "torch_hip")
PYTHON_TARGETS = ("torch_python", "_C")
LINALG_TARGETS = ("torch_cuda_linalg",)
BACKENDS = ("cpu", "cuda", "rocm")
# gfx targets the ROCm test builds compile for: two, both known to Debian's HIP 5.2 clang
ROCM_TEST_ARCH = "gfx90a;gfx1030"
HIPIFY_PACKAGE = "torch/utils/hipify/"


class HarnessUnavailable(Exception):
    """A tool the real build needs is missing; tests skip with this reason."""


FRONTENDS = ("setup.py", "scikit-build-core")
# what every build environment gets, pinned in requirements-dev.txt
BUILD_REQUIREMENTS = ("setuptools", "scikit-build-core", "pathspec", "packaging")
SCIKIT_BUILD_PYPROJECT = "pyproject.scikit-build.toml"


def pinned(name: str) -> str:
    """`name==version` as requirements-dev.txt pins it."""
    text = (REPO_ROOT / "requirements-dev.txt").read_text()
    match = re.search(rf"^{re.escape(name)}==\S+", text, re.MULTILINE)
    if not match:
        raise HarnessUnavailable(f"requirements-dev.txt pins no {name}")
    return match.group(0)


def setuptools_requirement() -> str:
    return pinned("setuptools")


def check_tools(cmake: str = NEWEST_CMAKE) -> None:
    for tool in ("g++", "gcc"):
        if shutil.which(tool) is None:
            raise HarnessUnavailable(f"{tool} not found on PATH; the real test project needs it")
    try:
        tool_path(cmake)
    except BuildToolsUnavailable as exc:
        raise HarnessUnavailable(str(exc)) from None


def check_rocm_tools() -> None:
    """hipcc and the HIP runtime (Debian: hipcc libamdhip64-dev rocm-device-libs)."""
    if shutil.which("hipcc") is None:
        raise HarnessUnavailable("hipcc not found on PATH; the ROCm tests compile HIP code with "
                                 "it (Debian/Ubuntu: apt-get install hipcc libamdhip64-dev "
                                 "rocm-device-libs; the ROCm images have /opt/rocm/bin/hipcc)")


def download_torch_wheel(dest: Path, version: str = "2.13.0") -> Path:
    """The real PyTorch CPU wheel for CPython 3.11 (pip's offline cache serves it)."""
    dest.mkdir(parents=True, exist_ok=True)
    proc = _run([sys.executable, "-m", "pip", "download", f"torch=={version}", "--no-deps",
                 "--only-binary=:all:", "--python-version", "3.11", "--platform",
                 "manylinux_2_28_x86_64", "-d", dest, "--disable-pip-version-check", "--quiet"],
                timeout=600)
    wheels = sorted(dest.glob(f"torch-{version}*cp311*.whl"))
    if proc.returncode != 0 or not wheels:
        reason = ((proc.stderr or proc.stdout).strip().splitlines() or ["no wheel"])[-1]
        raise HarnessUnavailable(f"PyTorch {version} CPU wheel for cp311 not available "
                                 f"offline: {reason}")
    return wheels[0]


def install_hipify(src: Path, torch_wheel: Path) -> Path:
    """Unpack PyTorch's real hipify package from the wheel into src/torch/utils/hipify, where
    it lives in a PyTorch source tree (tools/amd_build/build_amd.py imports it from there)."""
    with zipfile.ZipFile(torch_wheel) as wheel:
        members = [n for n in wheel.namelist() if n.startswith(HIPIFY_PACKAGE) and
                   n.endswith(".py")]
        if not any(n.endswith("hipify_python.py") for n in members):
            raise HarnessUnavailable(f"{torch_wheel.name} has no {HIPIFY_PACKAGE}hipify_python.py")
        wheel.extractall(src, members)
    return src / HIPIFY_PACKAGE


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


def fetch_setuptools(wheelhouse: Path) -> Path:
    """Download the pinned build requirements' wheels once (PyPI or the configured index)."""
    reqs = [pinned(name) for name in BUILD_REQUIREMENTS]
    wheelhouse.mkdir(parents=True, exist_ok=True)
    if not list(wheelhouse.glob("scikit_build_core-*.whl")):
        proc = _run([sys.executable, "-m", "pip", "download", *reqs, "--no-deps",
                     "--only-binary=:all:", "-d", wheelhouse, "--quiet"], timeout=600)
        if proc.returncode != 0:
            raise HarnessUnavailable(f"cannot download {' '.join(reqs)}: "
                                     f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return wheelhouse


def make_venv(interpreter: Path, dest: Path, wheelhouse: Path) -> Path:
    """A virtual environment from `interpreter` with pip and the pinned build requirements
    (dependencies an older Python needs, such as tomli on 3.10, come from the index)."""
    python = dest / "bin" / "python"
    if not python.exists():
        proc = _run([interpreter, "-m", "venv", dest], timeout=600)
        if proc.returncode != 0:
            raise HarnessUnavailable(f"{interpreter} -m venv failed: {proc.stderr.strip()[-200:]}")
        proc = _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                     "--find-links", wheelhouse, *(pinned(n) for n in BUILD_REQUIREMENTS)],
                    timeout=600)
        if proc.returncode != 0:
            raise HarnessUnavailable(f"installing the build requirements into {dest} failed: "
                                     f"{proc.stderr.strip()[-200:]}")
    return python


def make_venvs(cpythons: dict[str, Path], root: Path) -> dict[str, Path]:
    wheelhouse = fetch_setuptools(root / "wheelhouse")
    return {ver: make_venv(exe, root / f"venv-{ver}", wheelhouse) for ver, exe in cpythons.items()}


def write_launcher(path: Path, log_file: Path) -> Path:
    """A compiler launcher that appends the object file of each compile to log_file."""
    path.write_text(
        "#!/bin/sh\n"
        "# records the -o argument of every compile, then runs the compiler\n"
        'out=""; prev=""\n'
        'for arg in "$@"; do [ "$prev" = "-o" ] && out="$arg"; prev="$arg"; done\n'
        f'echo "$out" >> "{log_file}"\n'
        'exec "$@"\n')
    path.chmod(0o755)
    return path


def target_of(object_path: str) -> str | None:
    match = re.search(r"CMakeFiles/([^/]+)\.dir/", object_path)
    return match.group(1) if match else None


def base_environ(launcher: Path, core_units: int, core_weight: int, jobs: int = 2,
                 cuda_arch: str = "8.0", rocm_arch: str = ROCM_TEST_ARCH,
                 cmake: str = NEWEST_CMAKE) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")
           and not k.startswith(("CMAKE_", "USE_", "BUILD_", "MEGATEST_", "FEEDSTOCK_", "HIP",
                                 "ROCM_"))}
    env.update({
        "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "CMAKE_C_COMPILER_LAUNCHER": str(launcher), "CMAKE_CXX_COMPILER_LAUNCHER": str(launcher),
        "CMAKE_CUDA_COMPILER_LAUNCHER": str(launcher),
        "FEEDSTOCK_MAX_JOBS": str(jobs), "FEEDSTOCK_CUDA_ARCH_LIST": cuda_arch,
        "FEEDSTOCK_ROCM_ARCH": rocm_arch,
        "MEGATEST_CORE_UNITS": str(core_units), "MEGATEST_CORE_WEIGHT": str(core_weight),
        "PATH": tool_path(cmake, env.get("PATH", "")),
        # the build's temporary files stay in its work folder (HIP's clang leaves an empty
        # <source>-XXXXXX folder per compile in the temp dir)
        "TMPDIR": str(launcher.parent),
    })
    return env


class RecordingFrontend:
    """Wraps the front end the source tree picks; notes where each build/install starts in
    the compile log."""

    def __init__(self, log_file: Path, inner: Frontend | None = None) -> None:
        self.log_file = log_file
        self.inner = inner or SetupPyFrontend()
        self.marks: list[tuple[str, int]] = []

    def build_dir(self, ctx: BuildContext) -> Path:
        return self.inner.build_dir(ctx)

    def layout_dir(self, ctx: BuildContext, target) -> Path:
        return layout_dir(self.inner, ctx, target)

    def check(self, ctx: BuildContext) -> str | None:
        return check_frontend(self.inner, ctx)

    def configure(self, ctx: BuildContext) -> bool:
        return configure_first(self.inner, ctx)

    def _mark(self, label: str) -> None:
        lines = self.log_file.read_text().splitlines() if self.log_file.exists() else []
        self.marks.append((label, len(lines)))

    def build(self, ctx: BuildContext) -> None:
        self._mark(f"build:{ctx.python}")
        self.inner.build(ctx)

    def install(self, ctx: BuildContext) -> None:
        self._mark(f"install:{ctx.python}")
        self.inner.install(ctx)


@dataclass
class MegabuildRun:
    src: Path
    stage: Path
    venvs: dict[str, Path]
    split_version: str
    prefixes: dict[str, Path]
    compile_log: Path
    variant: dict[str, str]
    base: dict[str, str]
    phases: dict[str, list[str]] = field(default_factory=dict)  # phase -> compiled objects
    seconds: dict[str, float] = field(default_factory=dict)

    def context(self, version: str, pkg_name: str, prefix: Path | None = None,
                **variant: str) -> BuildContext:
        return BuildContext.create(self.src, prefix or self.prefixes.get(version, self.src),
                                   self.venvs[version], {**self.variant, "PKG_NAME": pkg_name,
                                                         **variant}, self.base, self.stage)

    def compiled(self, phase: str | None = None) -> list[str]:
        if phase is not None:
            return self.phases[phase]
        return [o for objs in self.phases.values() for o in objs]


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of "3.12" or "3.13t" (a free-threaded build after the GIL one of its version)."""
    return (*(int(x) for x in version.removesuffix("t").split(".")), version.endswith("t"))


def copy_project(dest: Path, frontend: str = "setup.py") -> Path:
    """A copy of the test project in the shape of `frontend` (one of FRONTENDS)."""
    if frontend not in FRONTENDS:
        raise ValueError(f"frontend {frontend!r} is not one of {FRONTENDS}")
    shutil.copytree(PROJECT_DIR, dest, ignore=shutil.ignore_patterns(
        "build", "__pycache__", "*.egg-info", "megabuild-stage", "megabuild-build"))
    scikit_build = dest / SCIKIT_BUILD_PYPROJECT
    if frontend == "scikit-build-core":
        scikit_build.replace(dest / "pyproject.toml")
        (dest / "setup.py").unlink()
    else:
        scikit_build.unlink()
    return dest


def backend_variant(backend: str) -> dict[str, str]:
    """The variant keys that pick the GPU backend ("cpu", "cuda" 13.0 or "rocm" 7.2)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is not one of {BACKENDS}")
    return {"cuda_compiler_version": "13.0" if backend == "cuda" else "None",
            "rocm_version": "7.2" if backend == "rocm" else "None"}


def project_source(work: Path, backend: str, torch_wheel: Path | None,
                   frontend: str = "setup.py") -> Path:
    """A fresh copy of the project; for ROCm with PyTorch's real hipify in it."""
    src = copy_project(work / "src", frontend)
    if backend == "rocm":
        check_rocm_tools()
        if torch_wheel is None:
            raise HarnessUnavailable("the ROCm build needs the torch wheel (for its hipify)")
        install_hipify(src, torch_wheel)
    return src


def _fresh_work(work: Path, backend: str, torch_wheel: Path | None, frontend: str) -> tuple[Path, Path, Path]:
    """(an empty compile log, the recording launcher, the project's source) in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    log_file = work / "compiles.log"
    log_file.write_text("")
    launcher = write_launcher(work / "compile-launcher.sh", log_file)
    return log_file, launcher, project_source(work, backend, torch_wheel, frontend)


def run_megabuild(venvs: dict[str, Path], work: Path, *, gpu: bool = False,
                  backend: str | None = None, torch_wheel: Path | None = None,
                  core_units: int = 4, core_weight: int = 8,
                  split_version: str | None = None, blas: str = "generic",
                  extra_env: dict[str, str] | None = None, record: bool = True,
                  frontend: str = "setup.py", cmake: str = NEWEST_CMAKE) -> MegabuildRun:
    """split + libtorch (+ cuda-linalg) + one pytorch step per Python, all for real.
    `backend` ("cpu", "cuda", "rocm") wins over `gpu` (True: "cuda"); `frontend` picks the
    project's shape (FRONTENDS), and the driver picks its front end from that tree.

    `extra_env` is added to the driver's base environment; with `record=False` no recording
    launcher is set, so the driver chooses the launcher (the compile cache's ccache). `cmake`
    is the PyPI CMake release the run builds with (NEWEST_CMAKE by default)."""
    check_tools(cmake)
    backend = backend or ("cuda" if gpu else "cpu")
    log_file, launcher, src = _fresh_work(work, backend, torch_wheel, frontend)
    split_version = split_version or ("3.12" if "3.12" in venvs else sorted(venvs)[-1])
    variant = {**backend_variant(backend), "blas_impl": blas,
               "target_platform": "linux-64", "megabuild": "true", "use_magma": "true",
               "PKG_VERSION": "2.13.0", "CPU_COUNT": "2",
               # the CUDA+MKL build number: must never show in the package version
               "PKG_BUILDNUM": "300"}
    base = base_environ(launcher, core_units, core_weight, cmake=cmake)
    if not record:
        for lang in ("C", "CXX", "CUDA"):
            del base[f"CMAKE_{lang}_COMPILER_LAUNCHER"]
    base.update(extra_env or {})
    run = MegabuildRun(src=src, stage=src / "megabuild-stage", venvs=venvs,
                       split_version=split_version, prefixes={}, compile_log=log_file,
                       variant=variant, base=base)
    recorder = RecordingFrontend(log_file, select_frontend({}, src))

    def timed(label: str, ctx: BuildContext) -> None:
        start = time.monotonic()
        run_step(ctx, recorder)
        run.seconds[label] = time.monotonic() - start

    timed("split", run.context(split_version, "libtorch-split"))
    ordered = sorted(venvs, key=version_key)
    for index, version in enumerate(ordered):
        prefix = work / f"prefix-{version}"
        prefix.mkdir()
        run.prefixes[version] = prefix
        timed(f"libtorch:{version}", run.context(version, "libtorch"))
        if backend == "cuda":  # alternate the flavours so both get installed under a pytorch build
            magma = "true" if index % 2 else "false"
            timed(f"linalg:{version}", run.context(version, "libtorch-cuda-linalg",
                                                    use_magma=magma))
        timed(f"pytorch:{version}", run.context(version, "pytorch"))
    lines = log_file.read_text().splitlines()
    labels = []
    for label, _ in recorder.marks:
        kind, python = label.split(":", 1)
        version = next(v for v, p in venvs.items() if str(p) == python)
        labels.append("split" if kind == "build" and not labels else
                      "magma" if kind == "build" else f"pytorch:{version}")
    bounds = [start for _, start in recorder.marks] + [len(lines)]
    for label, start, end in zip(labels, bounds, bounds[1:]):
        run.phases[label] = [line for line in lines[start:end] if line]
    return run


def naive_build(venv_python: Path, work: Path, *, core_units: int, core_weight: int,
                gpu: bool = False, backend: str | None = None,
                torch_wheel: Path | None = None,
                frontend: str = "setup.py", cmake: str = NEWEST_CMAKE) -> tuple[float, list[str]]:
    """One independent clean build + install of the project for one Python (the old way;
    ROCm: hipify first, as every ROCm build must)."""
    backend = backend or ("cuda" if gpu else "cpu")
    log_file, launcher, src = _fresh_work(work, backend, torch_wheel, frontend)
    variant = {**backend_variant(backend), "blas_impl": "generic",
               "target_platform": "linux-64", "CPU_COUNT": "2"}
    ctx = BuildContext.create(src, work / "prefix", venv_python, variant,
                              base_environ(launcher, core_units, core_weight, cmake=cmake))
    start = time.monotonic()
    prepare_source(src)  # the release-tarball preparation every real build needs
    if backend == "rocm":
        run_command([venv_python, src / "tools" / "amd_build" / "build_amd.py"], ctx)
    chosen = select_frontend({}, src)
    if isinstance(chosen, ScikitBuildCoreFrontend):
        chosen.freeze_backend(ctx)  # a clean build has no split step to do it
    chosen.install(ctx)
    seconds = time.monotonic() - start
    return seconds, [line for line in log_file.read_text().splitlines() if line]
