"""One row per dependent, and the table `python -m feedstock downstream` prints."""
from __future__ import annotations

from dataclasses import asdict, dataclass

HEADER = ("dependent", "version", "built", "against", "imported", "passed", "failed", "skipped", "time", "result")


@dataclass
class Row:
    name: str
    version: str = "-"
    built: str = "-"
    against: str = "-"       # the pytorch build it ran against
    imported: str = "-"      # yes / no / - (never got that far)
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    result: str = "failed"   # passed, failed, skipped, unknown
    note: str = ""           # why it failed or was skipped: one line

    @property
    def ok(self) -> bool:
        return self.result == "passed"

    def cells(self) -> tuple[str, ...]:
        return (self.name, self.version, self.built, self.against, self.imported, str(self.passed),
                str(self.failed), str(self.skipped), f"{self.seconds:.0f}s", self.result)

    def to_dict(self) -> dict:
        return asdict(self)


def format_table(rows: list[Row]) -> str:
    body = [HEADER, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in body) for i in range(len(HEADER))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths)) + " |" for line in body]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    notes = [f"  {row.name}: {row.note}" for row in rows if row.note]
    return "\n".join(lines + notes)


def summary(rows: list[Row]) -> str:
    passed = sum(row.ok for row in rows)
    return f"downstream: {len(rows)} dependents, {passed} passed"
