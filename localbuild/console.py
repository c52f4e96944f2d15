"""Terminal output that is also written to the current config's log file."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import BinaryIO


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Console:
    """Writes bytes to stdout (unbuffered) and, while a log is open, to the log as well."""

    def __init__(self, stream: BinaryIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout.buffer
        self.log: BinaryIO | None = None

    def raw(self, data: bytes) -> None:
        try:
            self.stream.write(data)
            self.stream.flush()
        except (OSError, ValueError):
            # terminal gone (piped into `head`: EPIPE; a closed terminal: EIO): keep building
            # and logging, and let nothing more (nor the flush at exit) try to write there
            self._forget_stream()
        if self.log is not None:
            try:
                self.log.write(data)
                self.log.flush()
            except OSError as exc:  # e.g. disk full: the build goes on, the terminal still shows it
                self.log = None
                self.say(f"warning: log writing stopped ({exc.strerror or exc})")

    def _forget_stream(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)

    def say(self, message: str) -> None:
        self.raw(f"build-locally: {message}\n".encode("utf-8", "replace"))

    def progress(self, label: str, step: str, started: float) -> None:
        self.say(f"[{label}] {step} ({format_duration(time.monotonic() - started)} elapsed)")
