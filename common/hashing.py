"""A file's sha256, read in blocks (release tarballs and wheels are hundreds of MB)."""
from __future__ import annotations

import hashlib
from pathlib import Path

from .input_files import open_regular


def sha256_of(path: Path) -> str:
    """The file's sha256, read in 1 MiB blocks (release tarballs are hundreds of MB); the
    feedstock tooling (bump, downstream sources) uses this one too."""
    digest = hashlib.sha256()
    with open_regular(path) as stream:  # a FIFO or a device is refused, never read forever
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
