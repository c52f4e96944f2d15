"""The one way build-locally.py and the feedstock tools write files: a temporary sibling renamed
into place, so an interruption or a failure leaves the old file or none, never a part of one
(the driver, recipe/megabuild, keeps its own small writer: conda-build copies only recipe/).

- `atomic_path` / `write_atomically`: one file.
- `atomic_folder` / `atomic_symlink`: a folder filled beside its place, a link swapped in one step.
- `replace_files`: several files, all or nothing: every one is written to its temporary first,
  then the renames run with Ctrl-C and SIGTERM held back, so an interruption lands before the
  first rename (nothing changed) or after the last (everything did).

Temporaries are `.<name>.<8 characters>.tmp` beside the file (`leftover_temps` finds what a kill
left). A replaced file keeps its mode, never a symlink target's. Standard library only.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from .interrupts import signals_held


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def new_mode(path: Path) -> int:
    """The mode of the file being replaced, never of a link's target (a symlink replaced by a
    file gets the default mode, as a new file)."""
    if path.exists() and not path.is_symlink():
        return path.stat().st_mode & 0o7777
    return 0o666 & ~_umask()


def _temporary_beside(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    return Path(temp)


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary sibling of `path` to write; renamed onto `path` when the block ends without
    an exception, removed when it raises."""
    temp = _temporary_beside(path)
    try:
        yield temp
        os.chmod(temp, new_mode(path))
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # no half-written file left behind
            temp.unlink()
        raise


@contextlib.contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """A new temporary sibling folder to fill; it takes the place of `path` (an earlier folder
    there is removed first) when the block ends without an exception, and is removed when it
    raises: a stopped run leaves the old folder or none, never half of a new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield temp
        os.chmod(temp, 0o777 & ~_umask())   # mkdtemp's 0700 is for the temporary only
        with signals_held():
            shutil.rmtree(path, ignore_errors=True)
            os.replace(temp, path)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def atomic_symlink(link: Path, target: Path) -> None:
    """`link` points at `target`, replaced in one step: a reader (a Slurm task beside us) never
    finds it missing."""
    temp = _temporary_beside(link)
    temp.unlink()
    try:
        temp.symlink_to(target)
        os.replace(temp, link)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


def write_atomically(path: Path, text: str) -> None:
    """`path` holds `text` (UTF-8), or what it held before."""
    with atomic_path(path) as temp:
        temp.write_text(text, encoding="utf-8")


def replace_files(contents: dict[Path, str], remove: Iterable[Path] = ()) -> None:
    """Write every file to a temporary sibling first; rename them into place only when all are
    written, then remove `remove` (the renames are not interrupted by Ctrl-C). OSError goes to
    the caller, with nothing changed unless the renames had begun."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in contents.items():
            temp = _temporary_beside(path)
            staged.append((temp, path))
            with open(temp, "w", newline="", encoding="utf-8") as out:
                out.write(text)
            os.chmod(temp, new_mode(path))
        with signals_held():
            for temp, path in staged:
                os.replace(temp, path)
            staged.clear()
            for path in remove:
                path.unlink(missing_ok=True)
    finally:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)


def leftover_temps(folder: Path, ending: str = "") -> list[Path]:
    """The temporary files this module made in `folder` for files whose names end in `ending`,
    which a kill left behind. Only safe to remove under a lock that no writer is holding."""
    if not folder.is_dir():
        return []
    pattern = re.compile(rf"^\..*{re.escape(ending)}\.[a-z0-9_]{{8}}\.tmp$")
    return sorted(p for p in folder.iterdir() if pattern.match(p.name) and not p.is_dir())
