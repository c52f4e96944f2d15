"""The final job of a Slurm submission (`python -m localbuild.slurm.finish JOBDIR ARRAY_ID`):
after every task (afterany), index build_artifacts/ once, then write the summary.

Its output goes to JOBDIR/final.out; the summary also to build_artifacts/slurm-<id>-summary.txt.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..batch import Row, summary_table
from common.atomic_files import write_atomically
from .client import TaskState, job_states
from .summary import JOB_FILE, SUMMARY_FILE, exit_status, read_json, task_row, write_json


def index_channel(job: dict) -> tuple[bool, str]:
    """The index step of localbuild/in_container/build_steps.sh alone (INDEX_ONLY=1), as the tasks would run it."""
    index = job["index"]
    env = dict(os.environ)
    env.update(index["env"])
    proc = subprocess.run(index["command"], env=env, cwd=job["feedstock_root"],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")
    sys.stdout.write(proc.stdout)
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    return proc.returncode == 0, last


def collect_rows(job_dir: Path, job: dict, states: list[TaskState] | None) -> list[Row]:
    by_task = {state.task: state for state in states or []}
    rows = [Row(r["name"], r["result"], None, None, Path(r["log"]) if r.get("log") else None)
            for r in job.get("not_submitted", [])]
    for index, config in enumerate(job["configs"]):
        rows.append(task_row(job_dir, config, Path(job["logs"][config]), by_task.get(index)))
    return rows


def main(argv: list[str]) -> int:
    job_dir, array_id = Path(argv[0]), argv[1]
    job = read_json(job_dir / JOB_FILE)
    if job is None:
        print(f"build-locally: error: {job_dir / JOB_FILE} is missing or unreadable", flush=True)
        return 2
    print(f"build-locally: indexing {job['artifacts']} after array job {array_id}", flush=True)
    indexed, last = index_channel(job)
    rows = collect_rows(job_dir, job, job_states(array_id))
    summary = summary_table(rows)
    if not indexed:
        summary += f"index of {job['artifacts']} failed: {last} (see {job_dir / 'final.out'})\n"
    status = exit_status(rows) if indexed else 1
    write_atomically(Path(job["artifacts"]) / f"slurm-{array_id}-summary.txt", summary)
    write_json(job_dir / SUMMARY_FILE, {"array": array_id, "summary": summary, "status": status,
                                        "indexed": indexed})
    sys.stdout.write(summary)
    return 0 if indexed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
