"""Commands run inside an unpacked root filesystem (podman run --rootfs): the pip steps, the
build stage, and the check that the environment's Python runs there at all."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ...errors import FeedstockError
from .environment import PREFIX

MISSING_LIBRARY = re.compile(r"error while loading shared libraries: (\S+?):")


def command_in(engine: str, rootfs: Path, argv: list[str], *, mounts: list[str] = (), network: str = "none",
               extra: list[str] = ()) -> list[str]:
    """The engine's command line running `argv` in the rootfs with the environment on PATH and
    no byte code written."""
    return [engine, "run", "--rm", f"--network={network}", *mounts, *extra,
            "-e", f"PATH={PREFIX}/bin:/usr/local/bin:/usr/bin:/bin", "-e", "PYTHONDONTWRITEBYTECODE=1",
            "--rootfs", str(rootfs), *argv]


def run_in(engine: str, rootfs: Path, argv: list[str], *, mounts: list[str] = (), network: str = "none",
           extra: list[str] = (), timeout: float = 3600) -> subprocess.CompletedProcess:
    """`argv` in the rootfs (command_in), its output captured."""
    return subprocess.run(command_in(engine, rootfs, argv, mounts=mounts, network=network, extra=extra),
                          capture_output=True, text=True, timeout=timeout)


def check_python(engine: str, rootfs: Path, where: str) -> None:
    """Before the slow part: the environment's python must start in `where` (one line naming
    the missing library otherwise)."""
    proc = run_in(engine, rootfs, [f"{PREFIX}/bin/python", "-c", "import sys"], timeout=300)
    if proc.returncode == 0:
        return
    output = proc.stderr + proc.stdout
    missing = MISSING_LIBRARY.search(output)
    if missing:
        raise FeedstockError(f"the environment's python does not run in {where}: {missing.group(1)} is in "
                             "neither the environment nor the base; give the base that library (--base), or "
                             "--host-python where the channel's python is a virtual environment of this machine's")
    tail = " ".join(output.split())[-300:] or f"exit {proc.returncode}"
    raise FeedstockError(f"the environment's python does not run in {where}: {tail}", exit_code=3)
