"""--dry-run: what would run for each config, without running or writing anything."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from . import engine as engines
from .batch import LOGS_ZIP, BatchOptions, will_run
from .location import location_of
from .build_plan import BuildPlan
from .options import Options
from .preflight import free_gb

RenderFn = Callable[[Path, str, dict], list]
DEV_TAG_VARIABLE = "FEEDSTOCK_DEV_TAG"


class RenderFailed(Exception):
    """`python -m feedstock render` refused the config: str() is its one line. `unavailable`:
    the tools could not even start (a dependency missing from this Python)."""

    def __init__(self, message: str, unavailable: bool = False) -> None:
        super().__init__(message)
        self.unavailable = unavailable


def load_renderer() -> tuple[RenderFn | None, type | None, str]:
    """The feedstock renderer, run as `python -m feedstock render CONFIG --json` in a process of
    its own (build-locally stands on the standard library and never imports the feedstock
    tools; they need PyYAML and Jinja2). Returns (render, RenderFailed, reason-when-missing)."""
    tools = Path(__file__).resolve().parents[1]
    if not (tools / "feedstock" / "__main__.py").is_file():
        return None, None, f"no feedstock tools beside build-locally.py in {tools}"

    def render(root: Path, config: str, build_env: dict) -> list:
        # the recipe reads the build's variables (FEEDSTOCK_DEV_TAG) as the build's own render does
        env = {key: value for key, value in os.environ.items() if key != DEV_TAG_VARIABLE}
        proc = subprocess.run([sys.executable, "-m", "feedstock", "--feedstock-root", str(root), "render",
                               config, "--json"], cwd=tools, capture_output=True, text=True, timeout=600,
                              env={**env, **build_env, "PYTHONPATH": str(tools)})
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            last = lines[-1] if lines else f"exit {proc.returncode}"
            if "ModuleNotFoundError" in last or "No module named" in last:
                raise RenderFailed(last, unavailable=True)
            raise RenderFailed(last.removeprefix("error: "))
        return [SimpleNamespace(**entry) for entry in json.loads(proc.stdout)]

    return render, RenderFailed, ""


def describe_outputs(root: Path, plan: BuildPlan, renderer: tuple[RenderFn | None, type | None, str]) -> list[str]:
    """Output lines of what the plan's build renders: its own config (the derived one a --python
    subset or --channel writes, rendered from a temporary copy) and its dev tag."""
    render, feedstock_error, why = renderer
    hint = f"run `python -m feedstock render {plan.name}` (needs requirements-dev.txt)"
    if render is None:
        return [f"outputs:      not rendered here (renderer unavailable: {why}); {hint}"]
    build_env = {DEV_TAG_VARIABLE: plan.dev_tag} if plan.dev_tag else {}
    try:
        with tempfile.TemporaryDirectory(prefix="build-locally-dry-run-") as scratch:
            config = plan.name
            if plan.derived_text is not None and plan.derived_config is not None:
                config = str(Path(scratch) / plan.derived_config.name)
                Path(config).write_text(plan.derived_text, encoding="utf-8")
            outputs = render(root, config, build_env)
    except Exception as exc:  # noqa: BLE001 - a renderer bug must not break the dry run
        if getattr(exc, "unavailable", False):
            return [f"outputs:      not rendered here (renderer unavailable: {exc}); {hint}"]
        kind = "" if feedstock_error and isinstance(exc, feedstock_error) else f"{type(exc).__name__}: "
        return [f"outputs:      cannot render ({kind}{exc}); {hint}"]
    lines = [f"outputs:      {len(outputs)}"]
    for output in outputs:
        name = getattr(output, "name", "?")
        version = getattr(output, "version", "?")
        build = getattr(output, "build_string", "?")
        lines.append(f"  {name}-{version}-{build}")
    return lines


def print_plans(plans: list[BuildPlan], options: Options, batch: BatchOptions,
                min_free_gb: float | None, write: Callable[[str], None]) -> None:
    renderer: tuple | None = None
    free = free_gb(options.artifacts)
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
        if renderer is None:
            renderer = load_renderer()
        for line in describe_outputs(options.feedstock_root, plan, renderer):
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
