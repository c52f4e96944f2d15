"""common/child_lifetime.py with real processes: a child started through subprocess after
tie_children() ends when its parent is killed with SIGKILL; one started before it, or from
another thread, does not (the kernel ties a child to the thread that forked it)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from common.owned_folders import alive
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

PARENT = """\
import subprocess, sys, threading, time
from common.child_lifetime import tie_children
how = sys.argv[1]
if how == "tied":
    tie_children()
def start():
    child = subprocess.Popen(["sleep", "300"], preexec_fn=lambda: print("own preexec", flush=True))
    print(child.pid, flush=True)
if how == "thread":
    tie_children()
    worker = threading.Thread(target=start)
    worker.start()
    worker.join()
else:
    start()
time.sleep(300)
"""


def _child_after_parent_killed(how: str) -> tuple[int, bool, str]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, how], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    first, second = parent.stdout.readline().strip(), parent.stdout.readline().strip()
    child = int(second)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + (5 if how == "tied" else 1)   # a tied one goes at once
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    still = alive(child)
    if still:
        os.kill(child, signal.SIGKILL)
    return child, still, first


def test_a_tied_child_ends_with_its_parent_and_the_callers_preexec_still_runs():
    _, still, first = _child_after_parent_killed("tied")
    assert not still
    assert first == "own preexec"


@pytest.mark.parametrize("how", ["untied", "thread"])
def test_untied_children_and_those_of_other_threads_live_on(how):
    _, still, _ = _child_after_parent_killed(how)
    assert still


def test_a_parent_gone_before_the_child_asked_is_seen(tmp_path: Path):
    """die_with_parent with the parent's pid: one that is no longer the parent means the
    signal at once (a parent killed between fork and prctl)."""
    code = textwrap.dedent("""
        import os, signal, sys
        from common.child_lifetime import die_with_parent
        die_with_parent(signal.SIGTERM, parent=os.getppid() + 1_000_000)
        print("not reached", flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGTERM and proc.stdout == ""
