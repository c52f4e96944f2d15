"""Ctrl-C and SIGTERM held back where an interruption would do harm, and passed on after.

- `signals_held`: the renames of an all-or-nothing write (common.atomic_files) run whole.
- `interrupt_after_call`: a library call that would swallow the interrupt (it runs Python
  callbacks inside its own code) returns first; its child processes are asked to stop so that
  it returns soon.

Standard library only.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import Callable, Iterator


@contextlib.contextmanager
def signals_held(on_first: Callable[[], None] | None = None) -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (then they arrive as usual). Python runs
    signal handlers in the main thread, so a handler that only notes the signal holds it back
    whichever thread the kernel delivered it to (a signal mask would hold back only one).
    `on_first` runs when the first one comes (to make the block end sooner)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def note(number: int, frame: object) -> None:
        caught.append(number)
        if on_first is not None and len(caught) == 1:
            on_first()

    previous = {signum: signal.signal(signum, note) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if caught:
            signal.raise_signal(caught[0])


def stop_children() -> list[int]:
    """SIGTERM to this process's own child processes (read from /proc; nothing where there is
    none); returns their ids."""
    me, stopped = os.getpid(), []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            fields = entry.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == me:
                os.kill(int(entry.parent.name), signal.SIGTERM)
                stopped.append(int(entry.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return stopped


@contextlib.contextmanager
def interrupt_after_call() -> Iterator[None]:
    """Around a call into a library that runs Python callbacks inside its own code and turns
    an exception raised there into its own error (py-rattler-build: a Ctrl-C in its log
    callback became one failed build, and the run went on): Ctrl-C and SIGTERM are held, the
    call's child processes (a build script, a compiler) are asked to stop so that it returns
    soon, and the interrupt arrives when it has."""
    with signals_held(on_first=stop_children):
        yield
