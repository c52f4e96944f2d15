"""What a Ninja build recompiled, read from the build folder's `.ninja_log`.

Ninja appends a line per command it runs (`start<TAB>end<TAB>mtime<TAB>output<TAB>hash`, after
a `# ninja log vN` header) and now and then rewrites the file keeping the last line of each
output. The last line of an object file therefore changes exactly when Ninja compiled it again:
comparing the log before and after a build counts the recompiled objects without a compiler
wrapper, and a compile cache cannot hide one (the command ran; ccache only made it fast).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOG_NAME = ".ninja_log"
OBJECT_SUFFIXES = (".o", ".obj")


def last_entries(build_dir: Path) -> dict[str, str]:
    """output -> its last log line (all but the timings), for every object file in the log;
    empty when there is no log yet (a first build)."""
    try:
        text = (Path(build_dir) / LOG_NAME).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    entries: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if line.startswith("#") or len(fields) < 5:
            continue
        output = fields[3]
        if output.endswith(OBJECT_SUFFIXES):
            entries[output] = "\t".join(fields[2:])   # mtime, output, command hash
    return entries


@dataclass(frozen=True)
class Recompiled:
    objects: tuple[str, ...]   # the object files compiled by this build
    total: int                 # every object file the build folder has

    @property
    def count(self) -> int:
        return len(self.objects)


def recompiled(before: dict[str, str], after: dict[str, str]) -> Recompiled:
    """The objects whose last line is new or changed between two `last_entries` reads."""
    changed = tuple(sorted(output for output, line in after.items() if before.get(output) != line))
    return Recompiled(changed, len(after))
