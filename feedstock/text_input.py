"""Reading a file the user gave or keeps (recipe, config, catalog): text or one clear error.

Every input file the tools read is UTF-8 text; a byte that is not (a Latin-1 `é`, a UTF-16
file) is a FeedstockError naming the file and the byte's position, never a traceback.
"""
from __future__ import annotations

from pathlib import Path

from .errors import FeedstockError


def read_text(path: Path, label: str | None = None) -> str:
    """The file's text; a file that is not UTF-8 is one error line (exit 2)."""
    label = label or str(path)
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise FeedstockError(f"{label}:{line}: byte 0x{data[err.start]:02x} is not UTF-8 text; "
                             "save the file as UTF-8") from None
