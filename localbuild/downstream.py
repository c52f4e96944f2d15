"""--downstream: after the batch, `python -m feedstock downstream` against build_artifacts/.

This package stays standard library only: the dependents' command needs PyYAML and rattler, so
it runs in the feedstock's development Python ($RATTLER_BUILD_PYTHON or .venv/bin/python, as
for --tool rattler-build natively), as a child process whose table goes to this terminal."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .channels import is_local
from .rattler import native_python


def command(feedstock_root: Path, artifacts: Path, channels: tuple[str, ...], environ: dict[str, str]) -> list[str]:
    """The command line: the local --channel folders the batch built against go along, since
    the dependents' builds need the same compilers and Python."""
    python = native_python(feedstock_root, environ) or sys.executable
    cmd = [python, "-m", "feedstock", "--feedstock-root", str(feedstock_root), "downstream",
           "--channel", str(artifacts)]
    for channel in channels:
        if is_local(channel):
            cmd += ["--with-channel", channel]
    return cmd


def run_downstream(feedstock_root: Path, artifacts: Path, channels: tuple[str, ...],
                   environ: dict[str, str], say) -> int:
    """Its exit status (0: every dependent that ran passed)."""
    cmd = command(feedstock_root, artifacts, channels, environ)
    say(f"downstream: {' '.join(cmd)}")
    return subprocess.run(cmd, cwd=feedstock_root, env=environ).returncode
