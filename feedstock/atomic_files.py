"""Replace several files so that either all change or none does (as far as a filesystem allows)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import FeedstockError


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def replace_files(contents: dict[Path, str]) -> None:
    """Write every file to a temporary sibling first; rename them into place only when all are written."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in contents.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(handle, "w", newline="") as out:
                out.write(text)
            os.chmod(temp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
            staged.append((Path(temp), path))
        for temp, path in staged:
            os.replace(temp, path)
        staged.clear()
    except OSError as err:
        raise FeedstockError(f"cannot write {err.filename}: {err.strerror}; check permissions and free space, then rerun")
    finally:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
