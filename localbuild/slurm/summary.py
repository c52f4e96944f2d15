"""What the tasks of a Slurm submission leave for the final job and the waiting client.

Each task writes JOBDIR/results/<config>.json (its summary row) when its build ends; a task
that Slurm killed (cancelled, out of time or memory) writes none, so its row comes from the
task's JobState. The final job turns them into the summary table a local batch prints
(batch.summary_table) and JOBDIR/summary.json, which `--wait` reads.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ..batch import Row
from ..errors import EXIT_BUILD_FAILED, EXIT_OK
from common.atomic_files import write_atomically
from .client import TaskState

JOB_FILE = "job.json"
SUMMARY_FILE = "summary.json"


def write_json(path: Path, data: object) -> None:
    write_atomically(path, json.dumps(data, indent=1, default=str) + "\n")


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def result_path(job_dir: Path, config: str) -> Path:
    return job_dir / "results" / f"{config}.json"


def write_result(job_dir: Path, row: Row) -> None:
    write_json(result_path(job_dir, row.name), asdict(row))


def row_from_dict(data: dict) -> Row:
    log = data.get("log")
    return Row(str(data["name"]), str(data["result"]), data.get("seconds"), data.get("packages"),
               Path(log) if log else None)


def task_row(job_dir: Path, config: str, log: Path, state: TaskState | None) -> Row:
    """The row of one task: what the build said, unless Slurm ended the task itself."""
    recorded = read_json(result_path(job_dir, config))
    seconds = float(state.run_seconds) if state else None
    if state is not None and state.state == "CANCELLED":
        return Row(config, "cancelled (scancel)", seconds, None, log)
    if recorded is not None:
        return row_from_dict(recorded)
    if state is None:
        return Row(config, "failed (no state: the controller forgot the task)", None, None, log)
    if state.state == "COMPLETED":  # ended well, yet wrote no row: treat as failed
        return Row(config, "failed (the task wrote no result)", seconds, None, log)
    return Row(config, f"failed ({state.state}, exit {state.exit_code})", seconds, None, log)


def exit_status(rows: list[Row]) -> int:
    bad = ("failed", "interrupted", "cancelled")
    return EXIT_BUILD_FAILED if any(row.result.startswith(bad) for row in rows) else EXIT_OK
