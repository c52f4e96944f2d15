"""Driving the lines build-locally prints for the user: find one by its marker, run a shell
line that wants a terminal (`run -it`) with a pseudo-terminal and type into it."""
from __future__ import annotations

import os
import pty
import select
import subprocess
import time


def line_after(output: str, marker: str) -> str:
    """What follows marker on the first line that holds it."""
    return next(line.split(marker, 1)[1].strip() for line in output.splitlines() if marker in line)


def in_a_terminal(command: str, typed: str, env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    """Run a shell line with a pseudo-terminal, type into it; (exit status, what it showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(["bash", "-c", command], stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True)
    os.close(slave)
    os.write(master, typed.encode())
    output = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), output.decode(errors="replace")
