"""A child process never outlives the command that started it (Linux: prctl PR_SET_PDEATHSIG).

A command killed with SIGKILL cannot stop its children, and nothing else does: they are
reparented to pid 1 and run on (a dry run's render, a tool's pip or podman client). The kernel
can signal a child when its parent dies; the child has to ask for it between fork and exec, and
it stays across exec.

- `die_with_parent`: this process asks for a signal when its parent dies (the build's guard).
- `tied`: a preexec_fn that asks for it in a child, for one subprocess call.
- `tie_children`: from here on, every child this process starts through `subprocess` from its
  main thread asks for SIGTERM (a child that still runs when its parent dies gets it at once).
  The commands' entry points call it (build-locally.py, python -m feedstock), not their main()
  functions, so that tests that call main() in their own process keep their own subprocess.

The kernel sends the signal when the *thread* that forked the child ends, so only children
started from the main thread are tied (a worker thread may end long before the process).
Elsewhere than Linux nothing changes. Standard library only.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Callable

PR_SET_PDEATHSIG = 1   # <linux/prctl.h>
_PRCTL: list = []      # libc's prctl once looked up ([None] where there is none)


def _prctl_function() -> Callable[..., int] | None:
    """libc's prctl, looked up in the parent: a child between fork and exec only calls it."""
    if not _PRCTL:
        found = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                found = ctypes.CDLL(None, use_errno=True).prctl
            except (OSError, AttributeError):
                found = None
        _PRCTL.append(found)
    return _PRCTL[0]


def die_with_parent(signum: int = signal.SIGTERM, parent: int | None = None) -> bool:
    """Ask the kernel for `signum` when this process's parent dies. A parent already gone
    (`parent` given and no longer ours) sends it at once. False where prctl is missing."""
    prctl = _prctl_function()
    if prctl is None:
        return False
    prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), int(signum))   # it died between fork and prctl
    return True


def tied(signum: int = signal.SIGTERM, then: Callable[[], object] | None = None) -> Callable[[], None]:
    """A preexec_fn for subprocess: the child gets `signum` when this process dies; `then` is
    the caller's own preexec_fn, run after (its prctl, if any, wins)."""
    parent = os.getpid()
    _prctl_function()   # resolved here, in the parent

    def preexec() -> None:
        die_with_parent(signum, parent)
        if then is not None:
            then()

    return preexec


class _TiedPopen(subprocess.Popen):
    signum = signal.SIGTERM

    def __init__(self, *args, **kwargs) -> None:
        if threading.current_thread() is threading.main_thread() and _prctl_function() is not None:
            kwargs["preexec_fn"] = tied(self.signum, kwargs.get("preexec_fn"))
        super().__init__(*args, **kwargs)


def tie_children(signum: int = signal.SIGTERM) -> None:
    """Every later child of this process's main thread, through subprocess.run, Popen and the
    rest (they all construct subprocess.Popen), gets `signum` when this process dies."""
    if _prctl_function() is None:
        return
    _TiedPopen.signum = signum
    if subprocess.Popen is not _TiedPopen:
        subprocess.Popen = _TiedPopen   # type: ignore[misc]
