"""Progress logging for the driver: one prefixed line per event, elapsed time per step.

Everything goes to stderr (conda-build captures it into the build log) and is flushed at once
so that the lines interleave correctly with the output of the compilers the driver runs.
"""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterator

PREFIX = "[megabuild]"


_held: list[str] | None = None  # messages held back by `held`, in order


def info(message: str) -> None:
    if _held is not None:
        _held.append(message)
        return
    print(f"{PREFIX} {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def held() -> Iterator[list[str]]:
    """Hold back what is logged inside and print it when the block ends (also when it fails);
    the block may put a line before the held ones (the settings line, made from what the
    block computed, yet the step's first line)."""
    global _held
    messages: list[str] = []
    outer, _held = _held, messages
    try:
        yield messages
    finally:
        _held = outer
        for message in messages:
            info(message)


def format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{rest:02d}s" if hours else f"{minutes}m{rest:02d}s"


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Log the start and end of a step with its elapsed time (also when it fails)."""
    info(f"==> {name}")
    start = time.monotonic()
    ok = False
    try:
        yield
        ok = True
    finally:
        elapsed = format_seconds(time.monotonic() - start)
        info(f"<== {name}: {'done' if ok else 'FAILED'} in {elapsed}")
