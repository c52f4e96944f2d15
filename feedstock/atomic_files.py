"""The feedstock's files written all or nothing (common.atomic_files, whose failures become one
FeedstockError line saying what to do), and one writer of them at a time, never beside a reader
(`feedstock_lock`).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from typing import Iterable, Iterator

from common import atomic_files
from common.atomic_files import leftover_temps, signals_held  # noqa: F401  (the feedstock's names)

from .errors import FeedstockError


def _what_to_do(err: OSError) -> str:
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space, then rerun"
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "check the folder's permissions, then rerun"
    if err.errno == errno.ENOENT:
        return "a file vanished while this ran (another command writing the feedstock?); rerun"
    return "rerun; nothing was changed"


@contextlib.contextmanager
def feedstock_lock(root: Path, command: str, say=print, *, shared: bool = False) -> Iterator[None]:
    """One writer of the feedstock's files at a time: a flock on the feedstock folder itself (no
    lock file to leave behind; the kernel drops it when the process ends). A writer holds it
    exclusively; a command that only reads them (``shared``) holds it shared, so readers never
    wait for each other, only for a writer, and never see a writer's files half replaced.
    A command that must wait says so, then computes from what the writer wrote."""
    fd = os.open(root, os.O_RDONLY)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"{command}: another command is writing {root}; waiting for it to finish")
            fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # releases the lock


def replace_files(contents: dict[Path, str], remove: Iterable[Path] = ()) -> None:
    """common.atomic_files.replace_files; a failure is one line naming the file and what to do."""
    try:
        atomic_files.replace_files(contents, remove)
    except OSError as err:
        raise FeedstockError(f"cannot write {err.filename}: {err.strerror}; {_what_to_do(err)}") from None
