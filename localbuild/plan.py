"""One build plan per selected config: backend, command, environment, marker and log paths.

Plans are pure data: --dry-run prints them, the batch runner executes them.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import apptainer
from . import engine as engines
from . import rattler
from .channels import local_folders
from .configs import CiConfig, host_platform
from .errors import EXIT_USAGE, LocalBuildError
from .gpu_archs import gpu_arch_list
from .ownership import host_user_id
from .overrides import DevOverrides, apply_to_config, derived_config_text
from .source_tarball import (RecipeSource, conda_build_cache_name, derived_recipe_text,
                             read_recipe_source, recipe_file)
from .tokens import CACHE_CREDENTIALS, UPLOAD_TOKENS, without_secrets

# The contract's developer-override variables (listed in meta.yaml build: script_env).
OVERRIDE_VARIABLES = ("FEEDSTOCK_MAX_JOBS", "FEEDSTOCK_HEAVY_JOBS", "FEEDSTOCK_CUDA_ARCH_LIST",
                      "FEEDSTOCK_ROCM_ARCH", "FEEDSTOCK_DEV_TAG", "FEEDSTOCK_COMPILE_CACHE",
                      "FEEDSTOCK_COMPILE_CACHE_READ_ONLY", "CCACHE_DIR")

ARTIFACTS = "build_artifacts"
CONTAINER_BACKENDS = ("docker", "apptainer")
BUILD_SCRIPT = "localbuild/in_container/build_steps.sh"
MARKER_PREFIX = "conda-forge-build-done-"


@dataclass(frozen=True)
class Options:
    """Everything from the command line and environment that shapes a plan."""

    feedstock_root: Path
    engine: engines.Engine
    native: bool = False
    overrides: DevOverrides = DevOverrides()
    debug: bool = False
    output_id: str | None = None
    upload: bool = False
    gpu_tests: bool = False
    test_only: bool = False
    cpu_count: str = "1"
    ci: str = ""
    extra_run_args: tuple[str, ...] = ()
    stdin_is_tty: bool = False
    emulate: bool = False
    stamp: str = "0"
    host: str = field(default_factory=host_platform)
    tool: str | None = None            # --tool; None: conda-build (native: whichever is installed)
    channels: tuple[str, ...] = ()     # --channel: instead of the config's channel_sources
    skip_tests: bool = False           # --skip-tests: build without the packages' tests
    index: str = "after-build"         # "skip": a Slurm array task; "only": the array's final job
    apptainer_image: str | None = None  # --apptainer-image SIF (else docker://<docker_image>)
    task_output: str | None = None     # a Slurm task's own output folder, relative to build_artifacts/
    source_tarball: Path | None = None  # --source-tarball: the recipe's source, fetched elsewhere

    @property
    def artifacts(self) -> Path:
        return self.feedstock_root / ARTIFACTS


# Options the user chose for the build itself: a Slurm task gets exactly these, serialized once
# by the submitting run (build_options_json) and read back by the task (with_build_options).
BUILD_FIELDS = ("engine", "native", "overrides", "output_id", "upload", "gpu_tests", "test_only",
                "emulate", "tool", "channels", "skip_tests", "apptainer_image", "source_tarball")
# What each machine (or task) decides for itself, from its own environment and role.
MACHINE_FIELDS = ("feedstock_root", "debug", "cpu_count", "ci", "extra_run_args", "stdin_is_tty",
                  "stamp", "host", "index", "task_output")


def build_options_json(options: Options) -> dict:
    """The BUILD_FIELDS of ``options`` as JSON data."""
    data = {name: getattr(options, name) for name in BUILD_FIELDS}
    data["engine"] = options.engine.executable
    data["overrides"] = dataclasses.asdict(options.overrides)
    data["channels"] = list(options.channels)
    data["source_tarball"] = str(options.source_tarball) if options.source_tarball else None
    return data


def with_build_options(options: Options, data: dict) -> Options:
    """``options`` with the BUILD_FIELDS of build_options_json's ``data``."""
    values = {name: data[name] for name in BUILD_FIELDS}
    overrides = dict(values["overrides"])
    overrides["pythons"] = tuple(overrides["pythons"])
    values.update(engine=engines.Engine(values["engine"]), overrides=DevOverrides(**overrides),
                  channels=tuple(values["channels"]),
                  source_tarball=Path(values["source_tarball"]) if values["source_tarball"] else None)
    return dataclasses.replace(options, **values)


@dataclass
class BuildPlan:
    config: CiConfig
    backend: str                       # "docker" | "apptainer" | "native" | "" (skipped)
    skip_reason: str | None            # why this machine does not build it (None: it does)
    marker: Path
    log: Path
    dev_tag: str | None = None
    image: str | None = None
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)          # passed with values
    passed_by_name: list[str] = field(default_factory=list)    # secrets: name only, value from env
    container: str | None = None
    mounts: list[str] = field(default_factory=list)
    derived_config: Path | None = None
    derived_text: str | None = None
    interactive: bool = False
    test_only: bool = False            # test packages already built; no build, no marker
    tool_command: list[str] = field(default_factory=list)     # rattler-build's own command line
    gpu_archs: str | None = None       # the arch list the build compiles for (None: CPU)
    tool: str = ""                     # conda-build | rattler-build ("" when skipped)
    source: RecipeSource | None = None  # with --source-tarball: the recipe's url and sha256
    source_path: str | None = None     # where the build reads the tarball (SOURCE_TARBALL)
    source_link: Path | None = None    # --native: a link named as the url's file, to the tarball
    derived_recipe: Path | None = None  # rattler-build: recipe/ copied with a file:// url
    derived_recipe_text: str | None = None  # that copy's recipe.yaml

    @property
    def name(self) -> str:
        return self.config.name


def make_plan(config: CiConfig, options: Options, environ: dict[str, str]) -> BuildPlan:
    root = options.feedstock_root
    artifacts = options.artifacts
    applied = apply_to_config(options.overrides, config)
    tag = applied.dev_tag
    suffix = f"-dev{tag}" if tag else ""
    plan = BuildPlan(config=config, backend="", skip_reason=None,
                     marker=artifacts / f"{MARKER_PREFIX}{config.name}{suffix}",
                     log=artifacts / f"{config.name}{suffix}-log.txt", dev_tag=tag)
    backend, reason = choose_backend(config, options)
    plan.skip_reason = reason or applied.skip_reason
    if plan.skip_reason:
        return plan
    plan.gpu_archs = gpu_arch_list(config, root, applied.env.get("FEEDSTOCK_CUDA_ARCH_LIST")
                                   or applied.env.get("FEEDSTOCK_ROCM_ARCH"))
    plan.backend = backend
    plan.interactive = options.debug
    plan.test_only = options.test_only
    if applied.keep_python_indices is not None or options.channels:
        plan.derived_config = artifacts / "localbuild" / f"{config.name}{suffix}.yaml"
        plan.derived_text = derived_config_text(config, applied.keep_python_indices,
                                                list(options.channels))
    in_container = backend in CONTAINER_BACKENDS
    inside_root = engines.CONTAINER_FEEDSTOCK if in_container else str(root)
    config_file = (f"{inside_root}/{ARTIFACTS}/localbuild/{plan.derived_config.name}"
                   if plan.derived_config else f"{inside_root}/.ci_support/{config.name}.yaml")
    env = _build_variables(plan, options, environ, config_file, inside_root, f"{config.name}{suffix}")
    env.update(applied.env)
    _compile_cache_and_tokens(plan, options, environ, env, in_container)
    _tool_and_command(plan, options, environ, env, config_file, inside_root, f"{config.name}{suffix}")
    plan.env = env
    return plan


def _build_variables(plan: BuildPlan, options: Options, environ: dict[str, str], config_file: str,
                     inside_root: str, label: str) -> dict[str, str]:
    """The variables build_steps.sh reads, before the overrides' own."""
    config, root = plan.config, options.feedstock_root
    env = {
        "CONFIG": config.name,
        "CONFIG_FILE": config_file,
        "DONE_MARKER": plan.marker.name,
        "HOST_USER_ID": host_user_id(environ),
        "CPU_COUNT": options.cpu_count,
        "CI": options.ci,
        "FEEDSTOCK_NAME": root.name,
        "CHANNEL_SOURCES": ",".join(options.channels or config.channel_sources),
        "UPLOAD_PACKAGES": "True" if options.upload else "False",
        "IS_PR_BUILD": "False" if options.upload else "True",
    }
    backend_name, gpu_version = config.gpu
    if backend_name == "cuda" and gpu_version:
        # read here, by the one reader of config files (build_steps.sh used to sed it out)
        env["CONFIG_CUDA_VERSION"] = gpu_version
    if options.test_only:
        env["TEST_ONLY"] = "1"
    if options.skip_tests:
        env["SKIP_TESTS"] = "1"
    if options.index == "skip":
        env["SKIP_INDEX"] = "1"
    if options.task_output:
        env["TASK_OUTPUT_DIR"] = f"{inside_root}/{ARTIFACTS}/{options.task_output}/{label}"
    elif options.index == "only":
        env["INDEX_ONLY"] = "1"
    if options.debug:
        env["BUILD_WITH_CONDA_DEBUG"] = "1"
        if options.output_id:
            env["BUILD_OUTPUT_ID"] = options.output_id
    return env


def _compile_cache_and_tokens(plan: BuildPlan, options: Options, environ: dict[str, str],
                              env: dict[str, str], in_container: bool) -> None:
    cache = options.overrides.compile_cache
    if cache is not None:
        inside = options.overrides.compile_cache_dir is not None and in_container
        env["FEEDSTOCK_COMPILE_CACHE"] = engines.CONTAINER_COMPILE_CACHE if inside else cache
        if options.overrides.compile_cache_read_only:
            env["FEEDSTOCK_COMPILE_CACHE_READ_ONLY"] = "1"
        plan.passed_by_name += [name for name in CACHE_CREDENTIALS if environ.get(name)]
    if options.upload:
        plan.passed_by_name += [name for name in UPLOAD_TOKENS if environ.get(name)]


def _tool_and_command(plan: BuildPlan, options: Options, environ: dict[str, str], env: dict[str, str],
                      config_file: str, inside_root: str, label: str) -> None:
    """The build tool, its command line (rattler-build) and the command that runs the build."""
    root, config = options.feedstock_root, plan.config
    in_container = plan.backend in CONTAINER_BACKENDS
    plan.tool = options.tool or ("conda-build" if in_container
                                 else native_build_tool(root) or "conda-build")
    recipe_root = engines.CONTAINER_RECIPE if in_container else str(root / "recipe")
    if options.source_tarball is not None and options.index != "only":
        recipe_root = _use_source_tarball(plan, options, env, inside_root, label) or recipe_root
    if plan.tool == "rattler-build":
        if in_container:
            runner: list[str] = ["rattler-build"]
            artifacts_inside = f"{inside_root}/{ARTIFACTS}"
        else:
            runner, python = rattler.native_runner(root, environ)
            if python:
                env[rattler.PYTHON_VARIABLE] = python
            artifacts_inside = str(options.artifacts)
        plan.tool_command = rattler.build_command(runner, recipe_root, config_file, artifacts_inside,
                                                  options.skip_tests)
    if in_container:
        if options.tool:
            env["BUILD_TOOL"] = plan.tool
        if plan.backend == "apptainer":
            _apptainer_command(plan, config, options, env)
        else:
            _docker_command(plan, config, options, env)
    else:
        env.update({"FEEDSTOCK_ROOT": str(root), "RECIPE_ROOT": recipe_root,
                    "LOCALBUILD_NATIVE": "1", "BUILD_TOOL": plan.tool})
        plan.command = ["bash", str(root / BUILD_SCRIPT)]


def _use_source_tarball(plan: BuildPlan, options: Options, env: dict[str, str],
                        inside_root: str, stem: str) -> str | None:
    """--source-tarball: where the build reads the file (SOURCE_TARBALL), and for rattler-build
    the derived recipe folder it builds instead of recipe/ (returned; None for conda-build,
    which finds the file in its source cache under SOURCE_CACHE_NAME)."""
    recipe = recipe_file(options.feedstock_root, plan.tool)
    plan.source = read_recipe_source(recipe, f"recipe/{recipe.name}")
    name = plan.source.file_name
    if plan.backend in CONTAINER_BACKENDS:   # mounted read-only under the url's file name
        plan.source_path = f"{engines.CONTAINER_SOURCE_TARBALL}/{name}"
    else:   # a link with the url's file name: rattler-build extracts by the name's extension
        plan.source_link = options.artifacts / "localbuild" / "source" / name
        plan.source_path = str(plan.source_link)
    env["SOURCE_TARBALL"] = plan.source_path
    if plan.tool != "rattler-build":
        env["SOURCE_CACHE_NAME"] = conda_build_cache_name(plan.source)
        return None
    plan.derived_recipe = options.artifacts / "localbuild" / f"{stem}-recipe"
    plan.derived_recipe_text = derived_recipe_text(plan.source, Path(plan.source_path).as_uri())
    env["RECIPE_ROOT"] = f"{inside_root}/{ARTIFACTS}/localbuild/{plan.derived_recipe.name}"
    return env["RECIPE_ROOT"]


def _docker_command(plan: BuildPlan, config: CiConfig, options: Options, env: dict[str, str]) -> None:
    image = config.docker_image
    if not image:
        raise LocalBuildError(f"{config.path.name} has no docker_image; regenerate it with "
                              "`python -m feedstock rerender`", EXIT_USAGE)
    eng = options.engine
    plan.image = image
    plan.container = engines.container_name(config.name, options.stamp)
    plan.mounts = [engines.mount_argument(host, inside, read_only=ro)
                   for host, inside, ro in _container_mounts(options, plan)]
    command = [eng.executable, "run", "--name", plan.container,
               "--label", f"{engines.LABEL}={config.name}"]
    if plan.interactive:
        command.append("-it" if options.stdin_is_tty else "-i")
    for mount in plan.mounts:
        command += ["-v", mount]
    if options.gpu_tests:
        command += engines.gpu_arguments(eng, config.gpu[0])
    for key, value in env.items():
        command += ["-e", f"{key}={value}"]
    for key in plan.passed_by_name:
        command += ["-e", key]
    command += list(options.extra_run_args)
    command += [image, "bash", f"{engines.CONTAINER_FEEDSTOCK}/{BUILD_SCRIPT}"]
    plan.command = command


def _container_mounts(options: Options, plan: BuildPlan) -> list[tuple[Path, str, bool]]:
    """(host path, path inside, read-only) of a container build, Docker or Apptainer."""
    root = options.feedstock_root
    mounts = [(root, engines.CONTAINER_FEEDSTOCK, False),
              (root / "recipe", engines.CONTAINER_RECIPE, False)]
    if options.overrides.compile_cache_dir is not None:
        mounts.append((options.overrides.compile_cache_dir, engines.CONTAINER_COMPILE_CACHE, False))
    for folder in local_folders(options.channels):  # at the same path: one path on both sides
        mounts.append((folder, str(folder), True))
    if options.source_tarball is not None and plan.source_path is not None:
        mounts.append((options.source_tarball, plan.source_path, True))
    return mounts


def _apptainer_command(plan: BuildPlan, config: CiConfig, options: Options,
                       env: dict[str, str]) -> None:
    if not config.docker_image and not options.apptainer_image:
        raise LocalBuildError(f"{config.path.name} has no docker_image; regenerate it with "
                              "`python -m feedstock rerender`, or give --apptainer-image SIF",
                              EXIT_USAGE)
    plan.image = apptainer.image_reference(config.docker_image, options.apptainer_image)
    plan.mounts = [apptainer.bind_argument(host, inside, ro)
                   for host, inside, ro in _container_mounts(options, plan)]
    gpu = apptainer.gpu_arguments(config.gpu[0]) if options.gpu_tests else []
    plan.command = apptainer.exec_command(
        options.engine.executable, plan.image, plan.mounts, env, gpu, engines.CONTAINER_FEEDSTOCK,
        ["bash", f"{engines.CONTAINER_FEEDSTOCK}/{BUILD_SCRIPT}"])


def choose_backend(config: CiConfig, options: Options) -> tuple[str, str | None]:
    """('docker'|'native', None), or ('', why this machine cannot build the config)."""
    platform = config.platform
    host = options.host
    if options.native:
        if platform != host:
            return "", f"needs a {platform} host: a native build runs on the host (this is {host})"
        return "native", None
    if platform.startswith("linux-"):
        build = config.build_platform
        if _arch(build) != _arch(host) and not options.emulate:
            return "", (f"needs a {build} host: its image runs {build} code (this is {host}); "
                        "--emulate runs it under emulation (qemu/Rosetta, very slow)")
        return ("apptainer" if apptainer.is_apptainer(options.engine.executable)
                else "docker"), None
    if platform.startswith("osx-"):
        if host.startswith("osx-"):
            return "native", None
        return "", f"needs macOS: {platform} configs build natively on a Mac with conda-build"
    return "", f"{platform} config: not supported by build-locally"


def _arch(platform: str) -> str:
    """linux-aarch64 / osx-arm64 -> 'arm64-family'; linux-64 / osx-64 -> '64'."""
    arch = platform.split("-", 1)[-1]
    return "aarch64" if arch in ("aarch64", "arm64") else arch


def native_build_tool(feedstock_root: Path) -> str | None:
    """conda-build if installed; rattler-build if installed and the recipe has recipe.yaml."""
    import shutil

    if shutil.which("conda-build"):
        return "conda-build"
    if shutil.which("rattler-build") and (feedstock_root / "recipe" / "recipe.yaml").is_file():
        return "rattler-build"
    return None


def process_environment(plan: BuildPlan, environ: dict[str, str]) -> dict[str, str]:
    """The environment of the process we start (engine client or native build script)."""
    env = without_secrets(environ, set(plan.passed_by_name))
    if plan.backend == "apptainer":
        # the container starts clean (--cleanenv): secrets reach it by name through these
        env.update(apptainer.secrets_by_name(plan.passed_by_name, environ))
    if plan.backend == "native":
        # as in a container, only the flags decide these (a stale shell value must not turn
        # a release build into a dev build, or change its jobs)
        for name in OVERRIDE_VARIABLES:
            env.pop(name, None)
        env.update(plan.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def default_cpu_count(environ: dict[str, str]) -> str:
    return environ.get("CPU_COUNT") or str(usable_cores())


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
