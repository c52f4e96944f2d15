"""build-locally's one way to write a file: atomically (a temporary sibling, renamed into place),
so an interrupted or failed write leaves the old file or none, never a part of one. Standard
library only; devtools use it too."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write; renamed onto ``path`` when the block ends
    without an exception, removed when it raises."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # no half-written file left behind
            tmp.unlink()
        raise


def write_atomically(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
