"""Replace several files so that either all change or none does (as far as a filesystem allows).

Every file is written to a temporary sibling first; only when all are written are they renamed
into place (and obsolete ones removed), with Ctrl-C and SIGTERM held back for those few
renames: an interruption lands before the first rename (nothing changed) or after the last
(everything did), never in between.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import signal
import tempfile
import threading
from pathlib import Path
from typing import Iterable, Iterator

from .errors import FeedstockError


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (then they arrive as usual). Python runs
    signal handlers in the main thread, so a handler that only notes the signal holds it back
    whichever thread the kernel delivered it to (a signal mask would hold back only one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {signum: signal.signal(signum, lambda number, frame: caught.append(number))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if caught:
            signal.raise_signal(caught[0])


def _what_to_do(err: OSError) -> str:
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space, then rerun"
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "check the folder's permissions, then rerun"
    if err.errno == errno.ENOENT:
        return "a file vanished while this ran (another command writing the feedstock?); rerun"
    return "rerun; nothing was changed"


@contextlib.contextmanager
def feedstock_lock(root: Path, command: str, say=print) -> Iterator[None]:
    """One writer of the feedstock's files at a time: an exclusive flock on the feedstock
    folder itself (no lock file to leave behind; the kernel drops it when the process ends).
    A second writer waits, saying so, then computes from what the first one wrote."""
    fd = os.open(root, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"{command}: another command is writing {root}; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def leftover_temps(folder: Path, ending: str = "") -> list[Path]:
    """The temporary files replace_files made in `folder` for files whose names end in `ending`,
    which a kill left behind (mkstemp's `.<name>.<8 characters>.tmp`). Only safe to remove under
    the feedstock's lock, when no writer of ours is running."""
    if not folder.is_dir():
        return []
    pattern = re.compile(rf"^\..*{re.escape(ending)}\.[a-z0-9_]{{8}}\.tmp$")
    return sorted(p for p in folder.iterdir() if pattern.match(p.name) and not p.is_dir())


def _new_mode(path: Path) -> int:
    """The mode of the file being replaced, never of a link's target (a symlink replaced by a
    file gets the default mode, as a new file)."""
    if path.exists() and not path.is_symlink():
        return path.stat().st_mode & 0o7777
    return 0o666 & ~_umask()


def replace_files(contents: dict[Path, str], remove: Iterable[Path] = ()) -> None:
    """Write every file to a temporary sibling first; rename them into place only when all are
    written, then remove `remove` (the commit is not interrupted by Ctrl-C)."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in contents.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(handle, "w", newline="") as out:
                out.write(text)
            os.chmod(temp, _new_mode(path))
            staged.append((Path(temp), path))
        with signals_held():
            for temp, path in staged:
                os.replace(temp, path)
            staged.clear()
            for path in remove:
                path.unlink(missing_ok=True)
    except OSError as err:
        raise FeedstockError(f"cannot write {err.filename}: {err.strerror}; {_what_to_do(err)}") from None
    finally:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
