"""The Slurm commands build-locally uses: sbatch to submit, scontrol to read task states,
scancel to stop. No accounting database is assumed (many sites have one, a test cluster does
not): states come from `scontrol -o show job`, which keeps finished tasks for MinJobAge.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import EXIT_PREFLIGHT, LocalBuildError

TIMEOUT_S = 60.0
# states after which a task runs no more (squeue(1), JOB STATE CODES)
FINISHED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY",
                      "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED"})


@dataclass(frozen=True)
class TaskState:
    task: int | None        # ArrayTaskId (None: a plain job)
    state: str              # JobState, e.g. RUNNING, COMPLETED, FAILED, CANCELLED
    exit_code: str          # ExitCode, "status:signal"
    run_seconds: int

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


def _run(args: list[str], timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          errors="replace", timeout=timeout)


def _error_line(proc: subprocess.CompletedProcess) -> str:
    """Slurm's own words: its last `error:` line (the reason, not the generic summary first)."""
    lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors[0] if errors else lines[-1] if lines else f"exit {proc.returncode}")[:300]


def require_client() -> None:
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        raise LocalBuildError("--scheduler slurm needs the Slurm client (sbatch, scontrol) on "
                              "PATH; run on the cluster's login node, or install it (Debian: "
                              "apt-get install slurm-client)", EXIT_PREFLIGHT)


def require_controller() -> None:
    """`scontrol ping` must report the controller UP (SLURM_CONF says which one)."""
    try:
        proc = _run(["scontrol", "ping"], timeout=30)
        reason = None if proc.returncode == 0 and "is UP" in proc.stdout else _error_line(proc)
    except subprocess.TimeoutExpired:
        reason = "`scontrol ping` did not answer within 30 s"
    except OSError as exc:
        reason = str(exc)
    if reason:
        raise LocalBuildError(f"the Slurm controller is not reachable ({reason}); check "
                              "SLURM_CONF and that slurmctld runs, or use --dry-run to see the "
                              "scripts", EXIT_PREFLIGHT)


def check_submission(sbatch_args: list[str]) -> None:
    """`sbatch --test-only`: the controller validates partition, account, time, GPUs and memory
    without queueing anything; a refusal is its own message, verbatim."""
    proc = _run(["sbatch", "--test-only", *sbatch_args, "--wrap", "true"])
    if proc.returncode != 0:
        raise LocalBuildError(f"Slurm refuses these job options: {_error_line(proc)}",
                              EXIT_PREFLIGHT)


def submit(script: Path, extra: list[str] = ()) -> str:
    """sbatch --parsable SCRIPT; the job id."""
    proc = _run(["sbatch", "--parsable", *extra, str(script)])
    if proc.returncode != 0:
        raise LocalBuildError(f"sbatch {script.name} failed: {_error_line(proc)}", EXIT_PREFLIGHT)
    return proc.stdout.strip().split(";")[0]


def cancel(*job_ids: str) -> bool:
    try:
        return _run(["scancel", *job_ids], timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_FIELD = re.compile(r"(\w+)=(\S*)")


def _seconds(text: str) -> int:
    """RunTime [D-]HH:MM:SS as seconds."""
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":") if p.isdigit()]
    while len(parts) < 3:
        parts.insert(0, 0)
    return (int(days) if days.isdigit() else 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def parse_show_job(output: str) -> list[TaskState]:
    """`scontrol -o show job ID`: one line per task (an array's pending tasks may share one
    line with ArrayTaskId=2-3, which counts once per task)."""
    states: list[TaskState] = []
    for line in output.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobState" not in fields:
            continue
        run = _seconds(fields.get("RunTime", "0"))
        task_field = fields.get("ArrayTaskId")
        tasks: list[int | None] = [None]
        if task_field:
            tasks = list(_task_ids(task_field))
        for task in tasks:
            states.append(TaskState(task, fields["JobState"], fields.get("ExitCode", "0:0"), run))
    return states


def _task_ids(text: str):
    for part in text.split("%")[0].split(","):
        low, _, high = part.partition("-")
        if low.isdigit():
            yield from range(int(low), int(high or low) + 1)


def job_states(job_id: str) -> list[TaskState] | None:
    """The tasks of a job, or None when the controller does not answer (or forgot the job)."""
    try:
        proc = _run(["scontrol", "-o", "show", "job", job_id], timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return parse_show_job(proc.stdout)
