"""The scikit-build-core front end: PyTorch 2.14 and later (`pip` through the PEP 517 backend).

scikit-build-core configures CMake on every build, in the `build-dir` it is given, and keeps
that folder's objects unless it decides the folder is stale: it deletes `CMakeCache.txt` and
`CMakeFiles/` (every object) when `.skbuild-info.json` names another source tree or another
scikit-build-core installation (`skbuild_path`) than the running one. conda-build and
rattler-build give every Python its own host environment, so each one has its own
scikit-build-core, and a naive front end recompiles all of libtorch per Python. This front end
keeps the megabuild alive by three rules:

1. One build folder for every step, outside the source's `build/` (`BUILD_DIR_NAME`).
2. One scikit-build-core for every step: the split step copies the build environment's
   package (checked to be >= 1.0) into the stage (`BACKEND_DIR`), and every front-end call puts
   that copy first on `PYTHONPATH`, so `skbuild_path` never changes. Its dependencies
   (packaging, pathspec) still come from each step's own environment.
3. The cache decides, not the environment: every configure after the first gets the
   `USE_*`/`BUILD_*` (and `BLAS`, arch list) values of the current `CMakeCache.txt` in its
   environment, so that a step whose environment says `USE_MAGMA=0` cannot undo the split's
   MAGMA flip. That is what setup.py did (it read the environment only at the first configure).

Before each call the folder is checked (`check_build_dir`): a folder another source tree or
another scikit-build-core configured is refused, never silently rebuilt from scratch.

The driver's environment reaches CMake through the channels scikit-build-core and CMake read:
the `USE_*`/`BUILD_*` variables stay in the environment (the project's `cmake.define` or
`[tool.scikit-build.env]` tables read them), `CMAKE_*` variables that CMake reads from the
environment itself (generator, compiler launchers = the compile cache, prefix path) stay
there, every other `CMAKE_*` (the job pools' `CMAKE_JOB_POOLS`/`CMAKE_PROJECT_INCLUDE`) becomes
`--config-settings=cmake.define.<KEY>=<value>`, `CMAKE_BUILD_TYPE` becomes `cmake.build-type`, and `MAX_JOBS`
becomes `CMAKE_BUILD_PARALLEL_LEVEL` (scikit-build-core passes no `-j` to `cmake --build`).
`install.strip=false` keeps the symbol tables setup.py's build kept (scikit-build-core strips
by default). `pip --verbose` lets CMake's and Ninja's progress reach the build log.

The split step builds a wheel and stages libtorch from the wheel's `torch/{bin,lib,include,
share}`: what scikit-build-core installs, since this backend leaves no `build/lib.*`.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Mapping

from . import job_pools, log
from .cmake_cache import CMakeCache
from .context import BuildContext
from .errors import MegabuildError
from .build_commands import check_cache_source, run_command
from .python_target import PythonTarget
from .cmake_choice import fix_for, scikit_build_cmake
from .tool_versions import require_in_range

BUILD_DIR_NAME = "megabuild-build"  # in the source tree (rattler-build's staging cache keeps it)
BACKEND_DIR = "scikit-build-core"  # in the stage: the one scikit-build-core every step runs
WHEEL_DIR = "split-wheel"  # in the stage: the split build's wheel
LAYOUT_DIR = "split-wheel-layout"  # in the stage: the wheel's torch/ unpacked
MINIMUM_VERSION = (1, 0)
INFO_FILE = ".skbuild-info.json"
# Environment variables whose value the build tree's cache overrides after the first configure
STEERING = re.compile(r"^(USE_\w+|BUILD_\w+|BLAS|TORCH_CUDA_ARCH_LIST|PYTORCH_ROCM_ARCH)$")
# CMAKE_* variables that CMake itself reads from the environment; passing them as defines
# too would only repeat them
CMAKE_READS_FROM_ENV = re.compile(
    r"^CMAKE_(GENERATOR\w*|BUILD_PARALLEL_LEVEL|PREFIX_PATH|EXPORT_COMPILE_COMMANDS|"
    r"TOOLCHAIN_FILE|\w+_COMPILER_LAUNCHER|\w+_LINKER_LAUNCHER|COLOR_DIAGNOSTICS)$")
_QUERY = ("import json, os, scikit_build_core as s; "
          "print(json.dumps([s.__version__, os.path.dirname(os.path.abspath(s.__file__))]))")
# run by the step's interpreter: CMake's configure alone (see that file)
CONFIGURE_SCRIPT = Path(__file__).with_name("skbuild_configure.py")


def parse_version(text: str) -> tuple[int, ...]:
    """The leading release numbers of a version string ("1.1.2" -> (1, 1, 2), "0.11.6")."""
    match = re.match(r"\d+(\.\d+)*", text.strip())
    if not match:
        raise MegabuildError(f"cannot read scikit-build-core's version {text!r}")
    return tuple(int(part) for part in match.group(0).split("."))


def installed_backend(ctx: BuildContext) -> tuple[str, Path]:
    """(version, package folder) of the scikit-build-core that ctx.python imports."""
    env = {k: v for k, v in ctx.env.items() if k != "PYTHONPATH"}
    try:
        proc = subprocess.run([str(ctx.python), "-c", _QUERY], capture_output=True, text=True,
                              env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MegabuildError(f"cannot run {ctx.python}: {exc}") from None
    if proc.returncode != 0:
        raise MegabuildError(f"{ctx.python} cannot import scikit_build_core; the source tree "
                             "builds with scikit-build-core, so add `scikit-build-core >=1.0` to "
                             "the host requirements")
    version, folder = json.loads(proc.stdout)
    return version, Path(folder)


class ScikitBuildCoreFrontend:
    """PyTorch's PEP 517 build through scikit-build-core (2.14 and later)."""

    name = "scikit-build-core"

    def build_dir(self, ctx: BuildContext) -> Path:
        return ctx.build_dir or ctx.src_dir / BUILD_DIR_NAME

    def backend_dir(self, ctx: BuildContext) -> Path:
        """The folder put first on PYTHONPATH; holds the one scikit_build_core package."""
        return ctx.stage_dir / BACKEND_DIR

    # -- the build folder's guard ----------------------------------------------------------
    def check_build_dir(self, ctx: BuildContext) -> None:
        """Refuse a build folder that scikit-build-core would clear, or that belongs to another
        source tree, before anything runs (it says how to start over)."""
        build_dir = self.build_dir(ctx)
        source = Path(ctx.src_dir).resolve()
        backend = (self.backend_dir(ctx) / "scikit_build_core").resolve()
        start_over = f"remove {build_dir} to build from scratch"
        info_file = build_dir / INFO_FILE
        if info_file.exists():
            try:
                info = json.loads(info_file.read_text(encoding="utf-8"))
                if not isinstance(info, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:
                raise MegabuildError(f"{info_file} is unreadable ({exc}); scikit-build-core would "
                                     f"throw the whole build away; {start_over}") from None
            configured = info.get("source_dir")
            if configured and Path(configured) != source:
                raise MegabuildError(f"{build_dir} was configured for the source tree "
                                     f"{configured}, not {source}; {start_over}, or build from "
                                     "that tree")
            recorded = info.get("skbuild_path")
            if recorded and Path(recorded).resolve() != backend:
                raise MegabuildError(f"{build_dir} was configured by the scikit-build-core at "
                                     f"{recorded}, not by the driver's copy {backend}; running "
                                     f"it now would clear every object; {start_over}")
        check_cache_source(build_dir / "CMakeCache.txt", ctx.src_dir, start_over)

    def check(self, ctx: BuildContext) -> str:
        """What every step checks first: the CMake scikit-build-core will run (not only PATH's)
        in range, the build folder this tree's. Returns that CMake's path."""
        env = self._backend_env(ctx)
        chosen = scikit_build_cmake(ctx.python, ctx.src_dir, env)
        require_in_range(chosen.path, chosen.release, fix_for(chosen, ctx.python))
        self.check_build_dir(ctx)
        return chosen.path

    # -- the one scikit-build-core --------------------------------------------------------
    def freeze_backend(self, ctx: BuildContext) -> str:
        """Copy the environment's scikit-build-core (>= 1.0) into the stage; returns its version.
        Done by the split step; a copy that is already there is replaced only when it differs
        from the environment's version."""
        version, package = installed_backend(ctx)
        if parse_version(version)[:2] < MINIMUM_VERSION:
            raise MegabuildError(f"scikit-build-core {version} in the build environment "
                                 f"({package}) is older than 1.0, which this PyTorch needs; "
                                 "require `scikit-build-core >=1.0` in host")
        dest = self.backend_dir(ctx) / "scikit_build_core"
        stamp = self.backend_dir(ctx) / "VERSION"
        if dest.is_dir() and stamp.is_file() and stamp.read_text().strip() == version:
            log.info(f"scikit-build-core {version}: the driver's copy {dest} is current")
            return version
        tmp = self.backend_dir(ctx).with_name(BACKEND_DIR + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(package, tmp / "scikit_build_core",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (tmp / "VERSION").write_text(version + "\n")
        shutil.rmtree(self.backend_dir(ctx), ignore_errors=True)
        tmp.rename(self.backend_dir(ctx))
        log.info(f"scikit-build-core {version}: copied {package} -> {dest}; every step runs "
                 "this copy, so the build folder is never cleared for a new environment")
        return version

    def _require_backend(self, ctx: BuildContext) -> Path:
        if not (self.backend_dir(ctx) / "scikit_build_core").is_dir():
            raise MegabuildError(f"no scikit-build-core copy in {self.backend_dir(ctx)}; run the "
                                 "libtorch-split step (the top-level build) first")
        try:
            version = installed_backend(ctx)[0]
        except MegabuildError:
            version = "none"
        frozen = (self.backend_dir(ctx) / "VERSION").read_text().strip()
        if version != frozen:
            log.info(f"scikit-build-core: this environment has {version}; the build runs the "
                     f"split step's {frozen}, which keeps the build folder")
        return self.backend_dir(ctx)

    # -- how the environment reaches CMake ------------------------------------------------
    def _backend_env(self, ctx: BuildContext) -> dict[str, str]:
        """ctx.env with the driver's scikit-build-core first on PYTHONPATH, as the backend runs."""
        env = dict(ctx.env)
        path = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = str(self.backend_dir(ctx)) + (f":{path}" if path else "")
        return env

    def environment(self, ctx: BuildContext) -> dict[str, str]:
        """ctx.env with the driver's scikit-build-core first on PYTHONPATH, MAX_JOBS as
        CMAKE_BUILD_PARALLEL_LEVEL, and the steering variables taken from an existing cache."""
        env = self._backend_env(ctx)
        if env.get("MAX_JOBS"):
            env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", env["MAX_JOBS"])
        cache_file = self.build_dir(ctx) / "CMakeCache.txt"
        if cache_file.exists():
            for key, value in cache_overrides(env, CMakeCache.read(cache_file)).items():
                log.info(f"  {key}: the build folder's cache says {value}; the environment's "
                         f"{env[key]!r} would reconfigure it (the cache wins)")
                env[key] = value
        return env

    def settings(self, ctx: BuildContext) -> dict[str, str]:
        """The backend's config settings: the build folder, the build type and the other CMAKE_* defines."""
        # install.strip=false: scikit-build-core strips what it installs by default; the setup.py
        # build did not, and the packages keep the symbol tables they had (backtraces, nm, perf)
        settings = {"build-dir": str(self.build_dir(ctx)), "install.strip": "false"}
        for key, value in sorted(ctx.env.items()):
            if not key.startswith("CMAKE_") or CMAKE_READS_FROM_ENV.match(key):
                continue
            if key == "CMAKE_BUILD_TYPE":
                settings["cmake.build-type"] = value
            else:
                settings[f"cmake.define.{key}"] = value
        return settings

    def config_settings(self, ctx: BuildContext) -> list[str]:
        """pip's `--config-settings` arguments for `settings`."""
        # the long form: the short -C came with pip 23.1, and 3.10's bundled pip is older
        return [f"--config-settings={key}={value}" for key, value in self.settings(ctx).items()]

    def _pip(self, ctx: BuildContext, verb: list[str]) -> None:
        """pip on the source tree; the callers have checked the build folder first."""
        job_pools.ensure_include(ctx.env)  # CMake reads it at every configure
        # --verbose: pip shows the backend's CMake and Ninja output (the build log's progress;
        # without it an hours-long compile prints nothing)
        run_command([ctx.python, "-m", "pip", *verb, ".", "--no-deps", "--no-build-isolation",
                     "--disable-pip-version-check", "--verbose", *self.config_settings(ctx)],
                    ctx, env=self.environment(ctx))

    # -- the Frontend methods -------------------------------------------------------------
    def configure(self, ctx: BuildContext) -> bool:
        """CMake's configure alone, into the build folder, by the backend's own code path for
        it (the one its `sdist.cmake` setting takes), with the settings and environment the
        build gets; the build's own configure then finds the cache as it left it. False when
        the frozen scikit-build-core has no such path (the checks then wait for the build)."""
        self.check_build_dir(ctx)  # before anything is written
        version = self.freeze_backend(ctx)
        env = self.environment(ctx)
        probe = subprocess.run([str(ctx.python), str(CONFIGURE_SCRIPT), "--probe"], env=env,
                               cwd=ctx.src_dir, capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            log.info(f"scikit-build-core {version} has no configure-only entry; the checks "
                     "after CMake's configure wait for the build")
            return False
        job_pools.ensure_include(ctx.env)  # CMake reads it at every configure
        run_command([ctx.python, CONFIGURE_SCRIPT, json.dumps(self.settings(ctx))], ctx,
                    env=env)
        return True

    def build(self, ctx: BuildContext) -> None:
        """The split build: a wheel (kept in the stage), unpacked for staging."""
        self.check_build_dir(ctx)  # before anything is written
        self.freeze_backend(ctx)
        wheels = ctx.stage_dir / WHEEL_DIR
        shutil.rmtree(wheels, ignore_errors=True)
        wheels.mkdir(parents=True)
        self._pip(ctx, ["wheel", "--wheel-dir", str(wheels)])
        built = sorted(wheels.glob("*.whl"))
        if len(built) != 1:
            raise MegabuildError(f"expected one wheel in {wheels} after the build, found "
                                 f"{len(built)}; see pip's output above")
        layout = ctx.stage_dir / LAYOUT_DIR
        tmp = layout.with_name(LAYOUT_DIR + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        with zipfile.ZipFile(built[0]) as wheel:
            members = [n for n in wheel.namelist() if n.startswith("torch/")]
            wheel.extractall(tmp, members)
            for info in wheel.infolist():  # wheels keep the mode bits in external_attr
                mode = info.external_attr >> 16
                if info.filename in members and mode and not info.is_dir():
                    (tmp / info.filename).chmod(mode & 0o7777)
        shutil.rmtree(layout, ignore_errors=True)
        tmp.rename(layout)
        log.info(f"unpacked {built[0].name}'s torch/ -> {layout}")

    def install(self, ctx: BuildContext) -> None:
        self.check_build_dir(ctx)
        self._require_backend(ctx)
        self._pip(ctx, ["install"])

    def layout_dir(self, ctx: BuildContext, target: PythonTarget) -> Path:
        layout = ctx.stage_dir / LAYOUT_DIR / "torch"
        if not layout.is_dir():
            raise MegabuildError(f"no {layout} after the build; the wheel held no torch/ folder")
        return layout


def declares_scikit_build_core(pyproject: Path) -> bool:
    """Whether pyproject.toml's [build-system] build-backend is scikit-build-core's."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MegabuildError(f"cannot read {pyproject}: {exc}") from None
    try:
        import tomllib  # 3.11 and later; the driver's interpreter may be 3.10
    except ImportError:
        match = re.search(r"^\s*build-backend\s*=\s*[\"']([^\"']+)[\"']", text, re.MULTILINE)
        backend = match.group(1) if match else ""
    else:
        try:
            backend = tomllib.loads(text).get("build-system", {}).get("build-backend", "")
        except tomllib.TOMLDecodeError as exc:
            raise MegabuildError(f"{pyproject} is not valid TOML: {exc}") from None
    return str(backend).startswith("scikit_build_core")


def frontend_for(src_dir: Path) -> "ScikitBuildCoreFrontend | None":
    """The scikit-build-core front end when the tree declares it; None for a setup.py tree.
    A tree with neither is an error that names both."""
    pyproject = Path(src_dir) / "pyproject.toml"
    if pyproject.is_file() and declares_scikit_build_core(pyproject):
        return ScikitBuildCoreFrontend()
    if (Path(src_dir) / "setup.py").is_file():
        return None
    raise MegabuildError(f"{src_dir} has neither a setup.py nor a pyproject.toml whose "
                         "build-backend is scikit_build_core.build; SRC_DIR must be a PyTorch "
                         "source tree (2.13 and older: setup.py; 2.14 and later: scikit-build-core)")


def cache_overrides(env: Mapping[str, str], cache: CMakeCache) -> dict[str, str]:
    """The steering variables of `env` whose value in `cache` differs: the cache's values."""
    return {key: cache.get(key) for key in sorted(env)
            if STEERING.match(key) and key in cache and not same_setting(cache.get(key), env[key])}


_TRUE = {"1", "ON", "YES", "TRUE", "Y"}
_FALSE = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND", ""}


def same_setting(a: str, b: str) -> bool:
    """Equal values, or two spellings of one CMake boolean ("1" and "ON")."""
    if a == b:
        return True
    for spellings in (_TRUE, _FALSE):
        if a.upper() in spellings and b.upper() in spellings:
            return True
    return False
