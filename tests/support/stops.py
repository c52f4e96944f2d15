"""What a supervisor does to a command it stops, and what "as they were before" compares
(issue 48: stopped means clean)."""
from __future__ import annotations

import signal
import subprocess
from pathlib import Path

KILL_AFTER = 5.0    # the supervisor's wait between SIGTERM and SIGKILL (`timeout -k 5`)


def supervisor_stop(proc: subprocess.Popen, kill_after: float = KILL_AFTER) -> str:
    """SIGTERM, then SIGKILL `kill_after` seconds later if it still runs; how it ended."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=kill_after)
        return f"exit {proc.returncode} after SIGTERM"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "SIGKILL"


def snapshot(*folders: Path) -> dict[str, list[str]]:
    """Every path under each folder, relative to it."""
    return {str(folder): sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []
            for folder in folders}
