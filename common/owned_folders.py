"""Temporary folders named after the process that owns them, so that a later run removes what a
killed one left (SIGKILL runs no cleanup: a dry run's temp folder, a partial image, an
mmdebstrap root).

A folder is `<prefix><pid>-<random>`; `remove_stale(parent, prefix)` removes those whose pid
no longer runs. A pid that was reused keeps its folder until that process ends too: the safe
side. Names without a pid (made before this) are left alone. Standard library only.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from .mounts import is_at_or_below, mounts


def owned_prefix(prefix: str, pid: int | None = None) -> str:
    """The prefix for tempfile.mkdtemp/TemporaryDirectory: `prefix`, this process's pid, `-`."""
    return f"{prefix}{os.getpid() if pid is None else pid}-"


def make_owned(parent: Path, prefix: str) -> Path:
    """A new folder `<prefix><pid>-<random>` in `parent` (private, as mkdtemp makes it)."""
    return Path(tempfile.mkdtemp(prefix=owned_prefix(prefix), dir=parent))


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie counts as gone: it runs nothing any more)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True   # another user's process
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True   # no /proc: kill(0) said it is there
    return state != "Z"


def owner_of(name: str, prefix: str) -> int | None:
    match = re.match(re.escape(prefix) + r"(\d+)-", name)
    return int(match.group(1)) if match else None


def stale(parent: Path, prefix: str) -> list[Path]:
    """The folders of `parent` named `<prefix><pid>-...` whose owner is gone."""
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        pid = owner_of(entry.name, prefix)
        if pid is not None and pid != os.getpid() and not alive(pid) and entry.is_dir() \
                and not entry.is_symlink():
            found.append(entry)
    return found


def remove_stale(parent: Path, prefix: str) -> list[Path]:
    """Remove what `stale` finds; returns what it removed. A folder that holds a mount point
    (a root whose mounts outlived their process) is left: removing through a mount would
    delete the mounted tree's files."""
    removed = []
    for folder in stale(parent, prefix):
        if _holds_mount(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def _holds_mount(folder: Path) -> bool:
    try:
        table = mounts()
    except OSError:
        return False
    return any(is_at_or_below(entry.point, str(folder.resolve())) for entry in table)
