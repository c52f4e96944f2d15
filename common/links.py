"""A file placed by a hard link where it can be, else copied: the package channels and caches the
feedstock's commands and tests assemble from files that may live on another filesystem (a
machine cache in ~/.cache, a run's folder on a scratch filesystem or a tmpfs /tmp)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path


def link_or_copy(source: str | Path, dest: str | Path) -> None:
    """`dest` made a hard link to `source`, or a copy with its metadata where they are on two
    filesystems (or the filesystem has no hard links). Fits shutil.copytree's copy_function."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)
