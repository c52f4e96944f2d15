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
