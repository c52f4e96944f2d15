"""--dry-run: what would run for each config, without running or writing anything."""
from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Callable

from common.owned_folders import owned_prefix, remove_stale

from . import engine as engines
from .batch import LOGS_ZIP, BatchOptions, will_run
from .dry_run_render import DEV_TAG_VARIABLE, Rendered, RenderRequest, render_all, tools_folder
from .location import location_of
from .build_plan import BuildPlan
from .options import Options
from .preflight import free_gb

SCRATCH_PREFIX = "build-locally-dry-run-"


def plan_outputs(root: Path, plans: list[BuildPlan]) -> list[list[str]]:
    """The output lines of each plan's build, all rendered at once (one `render --batch` per
    core, not one process per config): its own config (the derived one a --python subset or
    --channel writes, rendered from a temporary copy) with its dev tag."""
    if not plans:
        return []
    tools, why = tools_folder()
    if tools is None:
        return [describe_outputs(plan, Rendered(error=why, unavailable=True)) for plan in plans]
    try:
        # named after this process, so that a run killed before its cleanup is removed by the next
        remove_stale(Path(tempfile.gettempdir()), SCRATCH_PREFIX)
        with tempfile.TemporaryDirectory(prefix=owned_prefix(SCRATCH_PREFIX)) as name:
            scratch = Path(name)
            requests = []
            for index, plan in enumerate(plans):
                config = plan.name
                if plan.derived_text is not None and plan.derived_config is not None:
                    copy = scratch / str(index) / plan.derived_config.name  # its own name: the job's name
                    copy.parent.mkdir()
                    copy.write_text(plan.derived_text, encoding="utf-8")
                    config = str(copy)
                requests.append(RenderRequest(config, {DEV_TAG_VARIABLE: plan.dev_tag} if plan.dev_tag else {}))
            results = render_all(tools, root, requests, scratch)
    except Exception as exc:  # noqa: BLE001 - a renderer that cannot start must not break the dry run
        results = [Rendered(error=f"{type(exc).__name__}: {exc}")] * len(plans)
    return [describe_outputs(plan, result) for plan, result in zip(plans, results)]


def describe_outputs(plan: BuildPlan, rendered: Rendered) -> list[str]:
    """Output lines of one plan's render: its outputs, or why there are none."""
    hint = f"run `python -m feedstock render {plan.name}` (needs requirements-dev.txt)"
    if rendered.unavailable:
        return [f"outputs:      not rendered here (renderer unavailable: {rendered.error}); {hint}"]
    if rendered.outputs is None:
        return [f"outputs:      cannot render ({rendered.error}); {hint}"]
    lines = [f"outputs:      {len(rendered.outputs)}"]
    for output in rendered.outputs:
        name = output.get("name", "?")
        version = output.get("version", "?")
        build = output.get("build_string", "?")
        lines.append(f"  {name}-{version}-{build}")
    return lines


def print_plans(plans: list[BuildPlan], options: Options, batch: BatchOptions,
                min_free_gb: float | None, write: Callable[[str], None]) -> None:
    free = free_gb(options.artifacts)
    # the same tests as the loop's below: only the plans that would build render
    building = [index for index, plan in enumerate(plans, 1) if not plan.skip_reason and will_run(plan, batch.force)]
    outputs = dict(zip(building, plan_outputs(options.feedstock_root, [plans[index - 1] for index in building])))
    for index, plan in enumerate(plans, 1):
        write(f"== [{index}/{len(plans)}] {plan.name}: {plan.config.description()}")
        if plan.skip_reason:
            write(f"skipped:      {plan.skip_reason}")
            continue
        if not will_run(plan, batch.force):  # the batch's own test, so the plan cannot differ
            write(f"skipped:      already built ({plan.marker} exists; --force rebuilds)")
            continue
        for line in where_and_how(plan, options):
            write(line)
        if plan.tool_command:
            write(f"build tool:   {shlex.join(plan.tool_command)}")
        for line in environment_lines(plan):
            write(line)
        write(f"channels:     {plan.env.get('CHANNEL_SOURCES', '')}"
              + (" (--channel, instead of the config's channel_sources)" if options.request.channels else ""))
        if plan.derived_config:
            what = " and ".join(part for part, given in (
                ("Pythons subset", options.request.pythons), ("--channel", options.request.channels))
                if given)
            write(f"config:       {plan.derived_config} (would be written: {what} of "
                  f".ci_support/{plan.name}.yaml)")
        for line in source_lines(plan, options):
            write(line)
        if plan.gpu_archs:
            write(f"gpu archs:    {plan.gpu_archs}")
        if plan.dev_tag:
            write(f"dev build:    FEEDSTOCK_DEV_TAG={plan.dev_tag} (build strings carry dev{plan.dev_tag}_)")
        for line in outputs[index]:
            write(line)
        write(f"marker:       {plan.marker}")
        write(f"log:          {plan.log}")
        need = min_free_gb if min_free_gb is not None else plan.config.disk_estimate_gb
        state = "ok" if free >= need else "TOO LITTLE"
        write(f"disk:         {free:.0f} GB free, needs about {need:.0f} GB ({state})")
    for line in batch_steps(plans, options, batch):
        write(line)
    write("dry run: nothing was started or written")


def where_and_how(plan: BuildPlan, options: Options) -> list[str]:
    """The plan's location, image and command."""
    lines = [f"location:     {location_of(plan).describe(options)}"]
    if plan.image:
        lines.append(f"image:        {plan.image}")
    return lines + [f"command:      {shlex.join(plan.command)}"]


def environment_lines(plan: BuildPlan) -> list[str]:
    """What the build gets in its environment (secrets by name only)."""
    return (["environment:"] + [f"  {key}={value}" for key, value in plan.env.items()]
            + [f"  {key}=<from your environment, --upload>" for key in plan.passed_by_name])


def source_lines(plan: BuildPlan, options: Options) -> list[str]:
    """--source-tarball: the file, what it stands for, and how the build reads it."""
    source = plan.source
    if source is None:
        return []
    lines = [f"source:       {options.request.source_tarball} (sha256 matches {source.label}: {source.url})"]
    if plan.source_link is not None:
        lines.append(f"  link:       {plan.source_link} -> {options.request.source_tarball} (would be written)")
    else:
        lines.append(f"  mount:      {options.request.source_tarball} at {plan.source_path} (read-only)")
    if plan.derived_recipe is not None:
        lines.append(f"  recipe:     {plan.derived_recipe} (would be written: recipe/ with "
                     f"{Path(plan.source_path).as_uri()} as its first url); rattler-build downloads nothing")
    else:
        lines.append(f"  cache:      {plan.env.get('SOURCE_CACHE_NAME')} in conda-build's src_cache "
                     f"(copied from {plan.source_path}, --cache-dir); conda-build downloads nothing")
    return lines


def batch_steps(plans: list[BuildPlan], options: Options, batch: BatchOptions) -> list[str]:
    """The lines for what the batch does around the builds: --prune and --zip-logs."""
    lines = []
    if batch.prune:
        builds = sum(will_run(plan, batch.force) for plan in plans)
        lines.append(f"between builds: {shlex.join(engines.prune_command(options.request.engine))} "
                     f"({max(builds - 1, 0)} time(s): between the {builds} config(s) that build, "
                     "never before the first or after the last)")
    if batch.zip_logs:
        target = options.artifacts / LOGS_ZIP.format(stamp="<time>")
        lines.append(f"after the batch: logs zipped into {target} (each config's log + summary.txt)")
    return lines
