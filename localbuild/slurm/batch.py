"""--scheduler slurm: a batch as one Slurm job array plus a final job, submitted from here.

Configs whose done-marker exists are not submitted (--force submits them). The job folder
build_artifacts/slurm/<stamp>/ holds the two scripts, job.json (what the final job needs),
each task's Slurm output and result row, and the summary. With --wait this process follows
the tasks (a line per change of state), prints the summary table of a local batch and exits
as a local batch would; Ctrl-C (or SIGTERM) cancels the array and the final job.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from . import client as slurm_client
from ..batch import Row, summary_table, will_run
from ..console import Console, format_duration
from ..errors import EXIT_BUILD_FAILED, EXIT_INTERRUPTED, EXIT_OK, LocalBuildError
from ..build_plan import BuildPlan
from ..options import Options
from ..plan import make_plan
from common.atomic_files import write_atomically
from .options import SlurmOptions
from .script import Submission, array_script_text, final_script_text
from .summary import JOB_FILE, SUMMARY_FILE, read_json, write_json

POLL_SECONDS = 2.0
FINAL_WAIT_S = 600.0    # the final job only indexes; it should not queue for long


def task_arguments(args: argparse.Namespace) -> list[str]:
    """What every task repeats after its config name, besides --array-task: --force (the
    submitting run already decided what to build) and the disk check. Every build option
    reaches the task through job.json's build_request (BuildRequest.to_json), not as flags."""
    out: list[str] = ["--force"]
    if args.min_free_gb is not None:
        out += ["--min-free-gb", str(args.min_free_gb)]
    return out


def plan_submission(plans: list[BuildPlan], options: Options, args: argparse.Namespace,
                    slurm: SlurmOptions, environ: dict[str, str]) -> tuple[Submission, dict, list[Row]]:
    """The submission (configs to build as tasks) and the rows of those not submitted."""
    submitted = [plan for plan in plans if will_run(plan, args.force)]
    not_submitted = [Row(plan.name, "skipped (" + plan.skip_reason.split(":")[0] + ")")
                     if plan.skip_reason else Row(plan.name, "skipped (done)", log=plan.log)
                     for plan in plans if plan not in submitted]
    job_dir = options.artifacts / "slurm" / options.stamp
    sub = Submission(job_dir=job_dir, configs=tuple(plan.name for plan in submitted),
                     python=sys.executable, feedstock_root=options.feedstock_root,
                     task_arguments=tuple(task_arguments(args)), slurm=slurm)
    job: dict = {"configs": list(sub.configs), "artifacts": str(options.artifacts),
                 "build_request": options.request.to_json(),
                 "feedstock_root": str(options.feedstock_root),
                 "logs": {plan.name: str(plan.log) for plan in submitted},
                 "not_submitted": [{"name": r.name, "result": r.result,
                                    "log": str(r.log) if r.log else None} for r in not_submitted]}
    if submitted:
        # its own container name (a failed task's kept container has the task's), removed after
        index = make_plan(submitted[0].config,
                          replace(options, index="only", stamp=f"{options.stamp}-index"), environ)
        command = index.command
        if index.container is not None:
            command = [command[0], "run", "--rm", *command[2:]]
        # values only, never secrets: the final job inherits the submitting environment
        job["index"] = {"command": command, "env": index.env}
    return sub, job, not_submitted


def print_dry_run(sub: Submission, job: dict, not_submitted: list[Row], write: Callable[[str], None]) -> None:
    for row in not_submitted:
        write(f"not submitted: {row.name}: {row.result}")
    if not sub.configs:
        write("nothing to submit: every selected config is built (--force resubmits)")
        return
    write(f"array: {len(sub.configs)} task(s)")
    for index, name in enumerate(sub.configs):
        write(f"  task {index}: {name}")
    write(f"== {sub.array_script} (would be written)")
    write(array_script_text(sub).rstrip())
    write(f"== {sub.job_dir / JOB_FILE}: build_request, what every task builds with (would be written)")
    write(json.dumps(job["build_request"], sort_keys=True))
    write(f"== {sub.final_script} (would be written once the array's id is known)")
    write(final_script_text(sub, "<ARRAY_ID>").rstrip())
    write("== command lines")
    write(shlex.join(sub.array_command()))
    write(shlex.join(sub.final_command("<ARRAY_ID>")))
    write("dry run: nothing was submitted or written")


def preflight(slurm: SlurmOptions) -> None:
    slurm_client.require_client()
    slurm_client.require_controller()
    slurm_client.check_submission(slurm.sbatch_arguments())


def submit(sub: Submission, job: dict, console: Console) -> tuple[str, str]:
    """Write the scripts and job.json, submit the array and the final job; (array, final) ids."""
    sub.job_dir.mkdir(parents=True, exist_ok=True)
    write_json(sub.job_dir / JOB_FILE, job)
    write_atomically(sub.array_script, array_script_text(sub))
    array_id = slurm_client.submit(sub.array_script, sub.array_command()[2:-1])
    try:
        write_atomically(sub.final_script, final_script_text(sub, array_id))
        final_id = slurm_client.submit(sub.final_script, sub.final_command(array_id)[2:-1])
    except (LocalBuildError, OSError):
        slurm_client.cancel(array_id)  # an array nobody indexes or summarises is not left behind
        raise
    console.say(f"submitted array job {array_id} ({len(sub.configs)} task(s)) and final job "
                f"{final_id} (afterany: index + summary); job folder {sub.job_dir}")
    return array_id, final_id


def follow(sub: Submission, array_id: str, final_id: str, console: Console) -> int:
    """--wait: progress lines until the final job ends, then the summary and the exit status."""
    seen: dict[int, str] = {}
    started = time.monotonic()
    total = len(sub.configs)
    try:
        while True:
            states = slurm_client.job_states(array_id) or []
            for state in sorted(states, key=lambda s: s.task if s.task is not None else -1):
                if state.task is None or seen.get(state.task) == state.state:
                    continue
                seen[state.task] = state.state
                name = sub.configs[state.task]
                after = f" after {format_duration(state.run_seconds)}" if state.finished else ""
                console.say(f"[{state.task + 1}/{total} {name}] {state.state}{after} "
                            f"(task {array_id}_{state.task}, "
                            f"{format_duration(time.monotonic() - started)} elapsed)")
            if len(seen) == total and all(s in slurm_client.FINISHED for s in seen.values()):
                break
            time.sleep(POLL_SECONDS)
        return _final_summary(sub, final_id, console)
    except KeyboardInterrupt:
        slurm_client.cancel(array_id, final_id)
        console.say(f"interrupted: cancelled array job {array_id} and final job {final_id}; "
                    "finished configs keep their packages and done-markers")
        return EXIT_INTERRUPTED


def _final_summary(sub: Submission, final_id: str, console: Console) -> int:
    console.say(f"all tasks ended; waiting for final job {final_id} (index + summary)")
    deadline = time.monotonic() + FINAL_WAIT_S
    while time.monotonic() < deadline:
        states = slurm_client.job_states(final_id)
        if states is None or all(state.finished for state in states):
            break
        time.sleep(POLL_SECONDS)
    summary = read_json(sub.job_dir / SUMMARY_FILE)
    if summary is None:
        console.say(f"the final job {final_id} wrote no summary; see {sub.job_dir / 'final.out'}")
        return EXIT_BUILD_FAILED
    console.raw(("\n" + summary["summary"]).encode())
    return int(summary.get("status", EXIT_BUILD_FAILED))


def run_slurm(plans: list[BuildPlan], options: Options, args: argparse.Namespace,
              slurm: SlurmOptions, environ: dict[str, str], dry_run: bool, wait: bool) -> int:
    sub, job, not_submitted = plan_submission(plans, options, args, slurm, environ)
    if dry_run:
        print_dry_run(sub, job, not_submitted, print)
        return EXIT_OK
    console = Console()
    if not sub.configs:
        console.raw(summary_table(not_submitted).encode())
        console.say("nothing to submit: every selected config is built (--force resubmits)")
        return EXIT_OK
    preflight(slurm)
    for row in not_submitted:
        console.say(f"not submitted: {row.name}: {row.result}")
    array_id, final_id = submit(sub, job, console)
    if not wait:
        console.say(f"follow it: squeue -j {array_id},{final_id}; summary: "
                    f"{Path(job['artifacts']) / f'slurm-{array_id}-summary.txt'}")
        return EXIT_OK
    return follow(sub, array_id, final_id, console)
