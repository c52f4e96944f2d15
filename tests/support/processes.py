"""The processes of a build, found by what their command lines name: "no build of it runs"
is then a fact to poll for, not a sleep to hope by."""
from __future__ import annotations

import os
import time
from pathlib import Path


def processes_naming(text: str) -> list[int]:
    """This machine's processes whose command line holds `text` (this process left out)."""
    needle, found = text.encode(), []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (entry / "cmdline").read_bytes() and int(entry.name) != os.getpid():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":   # a zombie runs nothing; its parent just has not reaped it
                    found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return sorted(found)


def wait_until_none_names(text: str, seconds: float = 10.0) -> float:
    """Poll until no process names `text`; how long that took. Fails after `seconds`."""
    started = time.monotonic()
    while processes_naming(text):
        assert time.monotonic() - started < seconds, (
            f"{seconds:.0f} s on, still running: {commands(processes_naming(text))}")
        time.sleep(0.05)
    return time.monotonic() - started


def commands(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            out.append(f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:300])
        except OSError:
            pass
    return out
