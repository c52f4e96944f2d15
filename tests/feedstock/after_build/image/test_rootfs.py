"""feedstock/after_build/image/rootfs.py: mmdebstrap, stopped by Ctrl-C or SIGTERM, is asked to
stop and waited for, so that it removes its own temporary root (a SIGKILL left GBs in TMPDIR)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.paths import REPO_ROOT

# a child that cleans up on SIGTERM, as mmdebstrap does; its parent raises KeyboardInterrupt on
# SIGTERM, as `python -m feedstock` and devtools/stand_in_image.py do
DRIVER = """\
import signal, sys
from feedstock.after_build.image.rootfs import run_to_its_end

def interrupted(signum, frame):
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, interrupted)
child = ["bash", "-c", 'trap "kill %1; sleep 1; rm -rf $WORK; exit 143" TERM; mkdir -p $WORK; touch $READY; '
                      'sleep 300 & wait']
try:
    run_to_its_end(child, {"WORK": sys.argv[1], "READY": sys.argv[2], "PATH": "/usr/bin:/bin"}, grace=float(sys.argv[3]))
except KeyboardInterrupt:
    print("interrupted")
    sys.exit(130)
"""


def _stopped_with_sigterm(tmp_path: Path, grace: str) -> tuple[subprocess.CompletedProcess, Path]:
    work, ready = tmp_path / "child-root", tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(work), str(ready), grace], cwd=REPO_ROOT,
                            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert work.is_dir()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), work


def test_sigterm_lets_the_child_remove_what_it_made(tmp_path: Path):
    done, work = _stopped_with_sigterm(tmp_path, grace="60")
    assert done.returncode == 130 and done.stdout.strip() == "interrupted", done.stderr
    assert not work.exists()   # the child's own cleanup ran before the parent went on


def test_a_child_that_does_not_stop_in_its_grace_is_killed(tmp_path: Path):
    started = time.monotonic()
    done, work = _stopped_with_sigterm(tmp_path, grace="0.2")
    assert done.returncode == 130 and time.monotonic() - started < 20
