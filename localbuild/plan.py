"""make_plan: one config's build plan (localbuild/build_plan.py) from the run's options: its
build location, command, environment, marker and log paths."""
from __future__ import annotations

from pathlib import Path

from . import engine as engines
from . import rattler
from .build_plan import MARKER_PREFIX, BuildPlan
from .configs import CiConfig
from .develop import DONE_MARKER as DEVELOP_DONE, LOG_NAME as DEVELOP_LOG, develop_folder
from .errors import EXIT_USAGE, LocalBuildError
from .gpu_archs import gpu_arch_list
from .location import choose as choose_location, location_of
from .location.native import native_build_tool
from .ownership import host_user_id
from .overrides import derived_config_text, dev_tag, override_environment, python_subset
from .options import ARTIFACTS, Options
from .source_tarball import conda_build_cache_name, derived_recipe_text, read_recipe_source, recipe_file
from .tokens import CACHE_CREDENTIALS, UPLOAD_TOKENS, without_secrets


def make_plan(config: CiConfig, options: Options, environ: dict[str, str]) -> BuildPlan:
    root = options.feedstock_root
    artifacts = options.artifacts
    request = options.request
    keep, no_python = python_subset(request, config)
    tag = None if no_python else dev_tag(request, config)
    suffix = f"-dev{tag}" if tag else ""
    plan = BuildPlan(config=config, location="", skip_reason=None,
                     marker=artifacts / f"{MARKER_PREFIX}{config.name}{suffix}",
                     log=artifacts / f"{config.name}{suffix}-log.txt", dev_tag=tag, keep_python_indices=keep)
    location, reason = choose_location(config, options)
    plan.skip_reason = reason or no_python
    if plan.skip_reason:
        return plan
    overrides = override_environment(request, config)
    plan.gpu_archs = gpu_arch_list(config, root, overrides.get("FEEDSTOCK_CUDA_ARCH_LIST")
                                   or overrides.get("FEEDSTOCK_ROCM_ARCH"))
    plan.location = location
    plan.interactive = options.debug
    plan.test_only = request.test_only
    if keep is not None or request.channels:
        plan.derived_config = artifacts / "localbuild" / f"{config.name}{suffix}.yaml"
        plan.derived_text = derived_config_text(config, keep, list(request.channels))
    where = location_of(plan)
    inside_root = where.inside_root(options)
    config_file = (f"{inside_root}/{ARTIFACTS}/localbuild/{plan.derived_config.name}"
                   if plan.derived_config else f"{inside_root}/.ci_support/{config.name}.yaml")
    env = _build_variables(plan, options, environ, config_file, inside_root, f"{config.name}{suffix}")
    env.update(overrides)
    _compile_cache_and_tokens(plan, options, environ, env, where.in_container)
    if request.develop is not None:
        _develop(plan, options, env)
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
        "CHANNEL_SOURCES": ",".join(options.request.channels or config.channel_sources),
        "UPLOAD_PACKAGES": "True" if options.request.upload else "False",
        "IS_PR_BUILD": "False" if options.request.upload else "True",
    }
    backend_name, gpu_version = config.gpu
    if backend_name == "cuda" and gpu_version:
        # read here, by the one reader of config files (build_steps.sh used to sed it out)
        env["CONFIG_CUDA_VERSION"] = gpu_version
    if options.request.test_only:
        env["TEST_ONLY"] = "1"
    if options.request.skip_tests:
        env["SKIP_TESTS"] = "1"
    if options.index == "skip":
        env["SKIP_INDEX"] = "1"
    if options.task_output:
        env["TASK_OUTPUT_DIR"] = f"{inside_root}/{ARTIFACTS}/{options.task_output}/{label}"
    elif options.index == "only":
        env["INDEX_ONLY"] = "1"
    if options.debug:
        env["BUILD_WITH_CONDA_DEBUG"] = "1"
        if options.request.output_id:
            env["BUILD_OUTPUT_ID"] = options.request.output_id
    return env


def _develop(plan: BuildPlan, options: Options, env: dict[str, str]) -> None:
    """--develop: the develop folder, its marker and log, and what develop.py reads."""
    request = options.request
    python = request.pythons[0]
    folder = develop_folder(options.artifacts, plan.name, python)
    plan.develop_folder = folder
    plan.marker, plan.log = folder / DEVELOP_DONE, folder / DEVELOP_LOG
    plan.interactive = request.shell
    env.update({"DEVELOP_SOURCE": str(request.develop), "DEVELOP_DIR": str(folder),
                "DEVELOP_PYTHON": python, "DONE_MARKER": DEVELOP_DONE})
    if request.shell:
        env["DEVELOP_SHELL"] = "1"


def _compile_cache_and_tokens(plan: BuildPlan, options: Options, environ: dict[str, str],
                              env: dict[str, str], in_container: bool) -> None:
    cache = options.request.compile_cache
    if cache is not None:
        inside = options.request.compile_cache_dir is not None and in_container
        env["FEEDSTOCK_COMPILE_CACHE"] = engines.CONTAINER_COMPILE_CACHE if inside else cache
        if options.request.compile_cache_read_only:
            env["FEEDSTOCK_COMPILE_CACHE_READ_ONLY"] = "1"
        plan.passed_by_name += [name for name in CACHE_CREDENTIALS if environ.get(name)]
    if options.request.upload:
        plan.passed_by_name += [name for name in UPLOAD_TOKENS if environ.get(name)]


def _tool_and_command(plan: BuildPlan, options: Options, environ: dict[str, str], env: dict[str, str],
                      config_file: str, inside_root: str, label: str) -> None:
    """The build tool, its command line (rattler-build) and the command that runs the build."""
    root = options.feedstock_root
    where = location_of(plan)
    plan.tool = options.request.tool or ("conda-build" if where.in_container
                                 else native_build_tool(root) or "conda-build")
    recipe_root = where.recipe_root(options)
    if options.request.source_tarball is not None and options.index != "only":
        recipe_root = _use_source_tarball(plan, options, env, inside_root, label) or recipe_root
    if plan.tool == "rattler-build":
        if where.in_container:
            runner: list[str] = ["rattler-build"]
            artifacts_inside = f"{inside_root}/{ARTIFACTS}"
        else:
            runner, python = rattler.native_runner(root, environ)
            if python:
                env[rattler.PYTHON_VARIABLE] = python
            artifacts_inside = str(options.artifacts)
        plan.tool_command = rattler.build_command(runner, recipe_root, config_file, artifacts_inside,
                                                  options.request.skip_tests)
    if where.in_container and options.request.tool:
        env["BUILD_TOOL"] = plan.tool
    if options.request.develop is not None and not where.in_container and rattler.PYTHON_VARIABLE not in env:
        python = rattler.native_python(root, environ)   # develop.py needs py-rattler, not the executable
        if python:
            env[rattler.PYTHON_VARIABLE] = python
    where.finish_plan(plan, options, env, recipe_root)


def _use_source_tarball(plan: BuildPlan, options: Options, env: dict[str, str],
                        inside_root: str, stem: str) -> str | None:
    """--source-tarball: where the build reads the file (SOURCE_TARBALL), and for rattler-build
    the derived recipe folder it builds instead of recipe/ (returned; None for conda-build,
    which finds the file in its source cache under SOURCE_CACHE_NAME)."""
    recipe = recipe_file(options.feedstock_root, plan.tool)
    plan.source = read_recipe_source(recipe, f"recipe/{recipe.name}")
    name = plan.source.file_name
    if location_of(plan).in_container:   # mounted read-only under the url's file name
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


def process_environment(plan: BuildPlan, environ: dict[str, str]) -> dict[str, str]:
    """The environment of the process we start (engine client or native build script)."""
    env = without_secrets(environ, set(plan.passed_by_name))
    location_of(plan).process_environment(plan, environ, env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
