"""Ctrl-C, SIGTERM and SIGHUP held back where an interruption would do harm, and passed on after.

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


# what stops a command: Ctrl-C, a supervisor's SIGTERM, the hangup of a closed terminal
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class SignalInterrupt(KeyboardInterrupt):
    """SIGTERM or SIGHUP taken as Ctrl-C: the same stop, and the name of what asked for it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_interrupt(signum: int, frame: object) -> None:
    """A handler that makes SIGTERM or SIGHUP a Ctrl-C (KeyboardInterrupt)."""
    raise SignalInterrupt(signum)


def interrupt_name(exc: BaseException) -> str:
    """`Ctrl-C`, `SIGTERM` or `SIGHUP` for an interrupt."""
    return exc.args[0] if isinstance(exc, SignalInterrupt) else "Ctrl-C"


def take_interrupts(handler: Callable[[int, object], None]) -> dict[int, object]:
    """Install `handler` for SIGTERM, and for SIGHUP unless it is ignored (`nohup` ignores it
    so that a command outlives its terminal); returns what was there before."""
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, handler)}
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, handler)
    return previous


@contextlib.contextmanager
def signals_held(on_first: Callable[[], None] | None = None) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block ends (then they arrive as usual; one
    that is ignored stays ignored). Python runs
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

    previous = {signum: signal.signal(signum, note) for signum in INTERRUPTS
                if signal.getsignal(signum) is not signal.SIG_IGN}
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
