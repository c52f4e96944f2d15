"""The matrix: every dependent against every pytorch build of the channels (one column per
version and flavour), one cell each, and the rule that makes a bump fail.

A cell is one of KINDS; every cell but `works` carries its reason (one line):
- works: installs unchanged, imports, its tests pass;
- rebuilt: its package's pins (run_exports, run constraints) exclude this pytorch, and a
  rebuild against it passes;
- needs release: its own requirements exclude this pytorch (a wheel's pairing, what pip
  plans), or the rebuild fails;
- fails: it installs (unchanged or rebuilt), but does not import or its tests fail;
- n/a: its flavour does not apply to this build (a gpu wheel on a cpu build).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .channel import TorchBuild

WORKS, REBUILT, NEEDS_RELEASE, FAILS, NOT_APPLICABLE = "works", "rebuilt", "needs release", "fails", "n/a"
KINDS = (WORKS, REBUILT, NEEDS_RELEASE, FAILS, NOT_APPLICABLE)
FINE_AFTER_A_BUMP = (WORKS, REBUILT)


@dataclass(frozen=True)
class Column:
    """One pytorch build of the channels: a version in one flavour."""
    build: TorchBuild

    @property
    def version(self) -> str:
        return self.build.version

    @property
    def flavour(self) -> str:
        return self.build.flavour

    @property
    def label(self) -> str:
        return f"{self.version} {self.flavour}"


@dataclass
class Cell:
    kind: str
    reason: str = ""        # why, for every kind but works
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class MatrixRow:
    name: str
    version: str
    built: str               # how: pip wheel, rattler-build sdist, rattler-build wheel
    cells: list[Cell] = field(default_factory=list)   # in column order


@dataclass
class Matrix:
    columns: list[Column]
    rows: list[MatrixRow] = field(default_factory=list)
    old: str = ""            # the versions compared by the exit rule
    new: str = ""

    def counts(self) -> dict[str, int]:
        found = {kind: 0 for kind in KINDS}
        for row in self.rows:
            for cell in row.cells:
                found[cell.kind] += 1
        return found


def version_key(version: str) -> tuple:
    from rattler import Version

    return (Version(version),)


def columns_of(builds: list[TorchBuild], versions: list[str] | None = None) -> list[Column]:
    """One column per (version, flavour), oldest version first; of several builds of one (other
    Pythons), the one of the lowest Python. With `versions`, only those versions."""
    chosen: dict[tuple[str, str], TorchBuild] = {}
    for build in sorted(builds, key=lambda b: tuple(int(p) for p in b.python.split(".") if p.isdigit())):
        if versions is None or build.version in versions:
            chosen.setdefault((build.version, build.flavour), build)
    return [Column(b) for b in sorted(chosen.values(), key=lambda b: (version_key(b.version), b.flavour))]


def not_applicable(flavour: str, column: Column) -> Cell | None:
    """The n/a cell when a dependent of this flavour cannot run on the column's build."""
    if flavour in ("any", column.flavour):
        return None
    return Cell(NOT_APPLICABLE, f"a {flavour} dependent; this build is {column.flavour}")


def old_and_new(columns: list[Column]) -> tuple[str, str]:
    """The oldest and the newest version of the columns."""
    versions = sorted({c.version for c in columns}, key=version_key)
    return (versions[0], versions[-1]) if versions else ("", "")


def regressions(matrix: Matrix) -> list[str]:
    """One line per dependent whose cell was `works` on the old version and is anything but
    works or rebuilt on a build of the new version that applies to it (n/a is not counted: the
    flavour does not apply, nothing broke)."""
    found = []
    indexed = list(enumerate(matrix.columns))
    old_columns = [i for i, c in indexed if c.version == matrix.old]
    new_columns = [i for i, c in indexed if c.version == matrix.new]
    if matrix.old == matrix.new:
        return []
    for row in matrix.rows:
        if not any(row.cells[i].kind == WORKS for i in old_columns):
            continue
        for i in new_columns:
            cell = row.cells[i]
            if cell.kind not in (*FINE_AFTER_A_BUMP, NOT_APPLICABLE):
                found.append(f"{row.name} {row.version}: works on {matrix.old}, {cell.kind} on "
                             f"{matrix.columns[i].label}: {cell.reason}")
    return found
