"""A prefix that looks like a conda environment, and snapshots of what a step installs into it."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    """One non-directory entry of a prefix: a regular file or a symlink."""

    is_symlink: bool
    link_target: str | None
    size: int
    mtime_ns: int
    inode: int


Snapshot = dict[str, Entry]


def create_prefix(python: Path, prefix: Path) -> Path:
    """A virtual environment made by `python`: bin/python, lib/pythonX.Y/site-packages, include/.

    conda environments have the same top-level shape (bin/, lib/, include/, share/ next to the
    interpreter's site-packages), which is what the split layout depends on.
    """
    subprocess.run([str(python), "-m", "venv", str(prefix)], check=True)
    for name in ("include", "share"):
        (prefix / name).mkdir(exist_ok=True)
    return prefix


def site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['platlib'])"
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def snapshot(root: Path) -> Snapshot:
    """Every file and symlink under root (relative POSIX paths), without following symlinks."""
    result: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        names = list(filenames) + [d for d in dirnames if (here / d).is_symlink()]
        for name in names:
            path = here / name
            st = path.lstat()
            link = os.readlink(path) if path.is_symlink() else None
            result[path.relative_to(root).as_posix()] = Entry(link is not None, link, st.st_size,
                                                              st.st_mtime_ns, st.st_ino)
    return result


def new_paths(before: Snapshot, after: Snapshot) -> set[str]:
    """Paths a step created: what conda-build puts into that output's package (it diffs names)."""
    return set(after) - set(before)


def changed_or_removed(before: Snapshot, after: Snapshot) -> set[str]:
    """Paths that existed before a step and were altered or deleted by it."""
    return {path for path, entry in before.items() if after.get(path) != entry}
