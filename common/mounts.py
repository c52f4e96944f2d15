"""The mount table (/proc/self/mounts), read once per call: which filesystems are mounted where.

Used by devtools/scratch_fs.py (the filesystem under TMPDIR) and by the tests' scratch folders
(what a test left mounted below its folder)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    device: str
    point: str
    fstype: str


def _unescape(field: str) -> str:
    """The kernel writes a space, tab, newline and backslash in a path as octal (\\040 ...)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def mounts(text: str | None = None) -> list[Mount]:
    """Every mount, in the order mounted; `text` stands in for the table's contents."""
    if text is None:
        text = Path("/proc/self/mounts").read_text(encoding="utf-8")
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            found.append(Mount(_unescape(fields[0]), _unescape(fields[1]), fields[2]))
    return found


def is_at_or_below(point: str, folder: str) -> bool:
    """Whether the mount point `point` is `folder` or lies below it (both absolute)."""
    return point == folder or point.startswith(folder.rstrip("/") + "/")


def mount_of(path: Path, table: list[Mount]) -> Mount | None:
    """The mount that holds `path`: the longest mount point above it (the last one mounted wins)."""
    resolved = str(path.resolve())
    holding = [entry for entry in table if is_at_or_below(resolved, entry.point)]
    return max(reversed(holding), key=lambda entry: len(entry.point), default=None)
