"""Whether a build's log holds one of some byte strings: read in 1 MiB blocks (a PyTorch build's
log runs to hundreds of MB), a match across a block boundary found too."""
from __future__ import annotations

import os
from pathlib import Path


def log_mentions(log: Path, texts: tuple[bytes, ...], last_bytes: int | None = None) -> bool:
    """Whether any of ``texts`` is in the log (only its last ``last_bytes`` when given);
    False when the log cannot be read."""
    longest = max(len(text) for text in texts)
    tail = b""
    try:
        with open(log, "rb") as stream:
            if last_bytes is not None:
                stream.seek(max(0, stream.seek(0, os.SEEK_END) - last_bytes))
            for block in iter(lambda: stream.read(1 << 20), b""):
                window = tail + block
                if any(text in window for text in texts):
                    return True
                tail = window[-longest:]
    except OSError:
        return False
    return False


# how the build's own refusals begin: build_steps.sh's (its other lines say what it does), the tools'
REASON_STARTS = ("build_steps.sh: error: ", "error: ", "Error: ", "ERROR: ")


def last_reason(log: Path, last_bytes: int = 64 << 10) -> str | None:
    """The build's last error line in the log's tail (build_steps.sh's own, or a tool's), for the
    summary row of a failed config; None when there is none or the log cannot be read."""
    try:
        with open(log, "rb") as stream:
            stream.seek(max(0, stream.seek(0, os.SEEK_END) - last_bytes))
            text = stream.read().decode("utf-8", "replace")
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith(REASON_STARTS):
            return line if len(line) <= 200 else line[:197] + "..."
    return None
