"""Replace several files so that either all change or none does (as far as a filesystem allows).

Every file is written to a temporary sibling first; only when all are written are they renamed
into place (and obsolete ones removed), with Ctrl-C and SIGTERM held back for those few
renames: an interruption lands before the first rename (nothing changed) or after the last
(everything did), never in between.
"""
from __future__ import annotations

import contextlib
import os
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
            os.chmod(temp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
            staged.append((Path(temp), path))
        with signals_held():
            for temp, path in staged:
                os.replace(temp, path)
            staged.clear()
            for path in remove:
                path.unlink(missing_ok=True)
    except OSError as err:
        raise FeedstockError(f"cannot write {err.filename}: {err.strerror}; check permissions and free space, then rerun")
    finally:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
