"""Builds the selected configs one after another: skip finished ones, prune between builds,
keep going after failures, stop cleanly on Ctrl-C, summarise, zip the logs."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import engine as engines
from common.atomic_files import atomic_path
from .console import Console, format_duration
from .errors import EXIT_BUILD_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PREFLIGHT
from .build_plan import BuildPlan
from .options import Options
from .runner import BuildInterrupted, Outcome, run_plan

LOGS_ZIP = "build-logs-{stamp}.zip"   # in build_artifacts/; the stamp is the run's start time and pid


@dataclass(frozen=True)
class BatchOptions:
    force: bool = False
    keep_going: bool = True
    prune: bool = False
    zip_logs: bool = False


@dataclass
class Row:
    name: str
    result: str
    seconds: float | None = None
    packages: int | None = None
    log: Path | None = None


def will_run(plan: BuildPlan, force: bool) -> bool:
    return not plan.skip_reason and (force or plan.interactive or plan.test_only
                                      or not plan.marker.exists())


def run_batch(plans: list[BuildPlan], options: Options, batch: BatchOptions, console: Console,
              environ: dict[str, str], rows: list[Row] | None = None) -> int:
    """Build the plans in turn; ``rows`` (if given) receives the summary rows."""
    rows = [] if rows is None else rows
    ran_before = False
    stop_reason = ""
    engine_lost = ""     # "<config> (<reason>)" once the container engine stopped answering
    for index, plan in enumerate(plans, 1):
        label = f"{index}/{len(plans)} {plan.name}"
        if stop_reason:
            rows.append(Row(plan.name, "not started"))
            continue
        if plan.skip_reason:
            console.say(f"[{label}] skipped: {plan.skip_reason}")
            rows.append(Row(plan.name, "skipped (" + plan.skip_reason.split(":")[0] + ")"))
            continue
        if not will_run(plan, batch.force):
            console.say(f"[{label}] skipped: already built ({plan.marker.name} exists; "
                        "--force rebuilds)")
            rows.append(Row(plan.name, "skipped (done)", log=plan.log))
            continue
        try:
            if batch.prune and ran_before:
                _prune(options.request.engine, console)
            ran_before = True
            outcome = run_plan(plan, options, console, label, environ)
        except BuildInterrupted as exc:
            outcome = exc.outcome
            stop_reason = "interrupted"
        except KeyboardInterrupt:  # during the prune, or while cleaning up after the build
            outcome = Outcome("interrupted", "Ctrl-C")
            stop_reason = "interrupted"
        rows.append(_row(plan, outcome))
        if outcome.engine_lost:
            stop_reason, engine_lost = "engine", f"{plan.name} ({outcome.engine_lost})"
        elif outcome.status == "failed" and not batch.keep_going:
            stop_reason = "failed"
    summary = summary_table(rows)
    console.raw(("\n" + summary).encode(errors="surrogateescape"))
    if batch.zip_logs:
        _zip_logs(plans, options, summary, console)
    if stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    if engine_lost:
        # one line for the user, after the summary that names what was built
        print(f"error: the {options.request.engine.kind} engine stopped answering during {engine_lost}; "
              f"{engines.how_to_start(options.request.engine)}, then run the same command again: the "
              "configs already built are skipped", file=sys.stderr, flush=True)
        return EXIT_PREFLIGHT
    if any(row.result.startswith(("failed", "interrupted")) for row in rows):
        return EXIT_BUILD_FAILED
    return EXIT_OK


def _row(plan: BuildPlan, outcome: Outcome) -> Row:
    result = outcome.status + (f" ({outcome.detail})" if outcome.detail else "")
    return Row(plan.name, result, outcome.seconds, len(outcome.packages), plan.log)


def _prune(engine: engines.Engine, console: Console) -> None:
    command = engines.prune_command(engine)
    console.say("pruning between configs: " + " ".join(command))
    proc = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace",
                          env=engines.client_environment())
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    if proc.returncode != 0:
        console.say(f"warning: prune failed (exit {proc.returncode}): {last}")
    elif last:
        console.say(f"pruned: {last}")


def summary_table(rows: list[Row]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        key = row.result.split(" ")[0]
        counts[key] = counts.get(key, 0) + 1
    header = ("config", "result", "duration", "packages")
    table = [header] + [(row.name, row.result,
                         format_duration(row.seconds) if row.seconds is not None else "-",
                         str(row.packages) if row.packages is not None else "-") for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(4)]
    lines = [f"summary: {len(rows)} config(s): "
             + ", ".join(f"{count} {status}" for status, count in counts.items())]
    for line in table:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    failed_logs = [row for row in rows if row.result.startswith("failed") and row.log]
    for row in failed_logs:
        lines.append(f"log of failed {row.name}: {row.log}")
    return "\n".join(lines) + "\n"


def _zip_logs(plans: list[BuildPlan], options: Options, summary: str, console: Console) -> None:
    import zipfile

    logs = [plan.log for plan in plans if plan.log.is_file()]
    target = options.artifacts / LOGS_ZIP.format(stamp=options.stamp)
    try:
        with atomic_path(target) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for log in logs:
                archive.write(log, arcname=log.name)
            archive.writestr("summary.txt", summary)
    except OSError as exc:  # the builds are done; a zip that cannot be written is a warning
        console.say(f"warning: could not zip the logs into {target}: {exc.strerror or exc}; "
                    "the logs are in build_artifacts/")
        return
    console.say(f"logs zipped: {target} ({len(logs)} log(s) + summary.txt)")
