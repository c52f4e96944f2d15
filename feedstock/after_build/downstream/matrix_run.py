"""`downstream --matrix`: each dependent against every pytorch build of the channels.

A conda kind is built once against its home build (the build its `torch` spec picks, as a
plain run does) and installed unchanged into an environment of every other build. When its
pins exclude that build (the solve fails), it is rebuilt against it: an sdist against that
pytorch and libtorch, a wheel with its run constraint widened to that x.y. A pip wheel is
tried where its `torch` spec (the release's pairing) allows, and pip's plan must leave our
torch alone. See matrix.py for the cell kinds."""
from __future__ import annotations

import re
import sys
import time
from dataclasses import replace
from pathlib import Path

from ...errors import FeedstockError
from . import conda_package, pip_wheel
from ...dependents_catalog import Dependent
from .channel import TorchBuild, matching
from .matrix import (FAILS, NEEDS_RELEASE, REBUILT, WORKS, Cell, Column, Matrix, MatrixRow, columns_of,
                     not_applicable, old_and_new, regressions)
from .run import EXIT_FAILED, EXIT_NO_PYTORCH, DownstreamRequest, Runner, error, fetch_sources, fresh_folder, prepare


def _safe(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text)


def widened(dependent: Dependent, build: TorchBuild) -> Dependent:
    """The entry with its torch spec also allowing this build's x.y (a wheel's rebuild)."""
    major_minor = ".".join(build.version.split(".")[:2])
    return replace(dependent, torch=f"{dependent.torch}|{major_minor}.*", build_number=dependent.build_number + 1)


def torch_pins(package: Path) -> str:
    """What the package says about pytorch and libtorch (depends and run constraints)."""
    from rattler_build import Package

    info = Package.from_file(package)
    found = [str(d) for d in [*info.depends, *(getattr(info, "constrains", None) or [])]
             if str(d).split(" ")[0] in ("pytorch", "libtorch")]
    return ", ".join(found) or "nothing about pytorch"


class MatrixRunner:
    def __init__(self, runner: Runner, columns: list[Column]) -> None:
        self.runner = runner
        self.columns = columns
        self.work = runner.options.work / "matrix"
        self.homes: dict[str, Path | conda_package.BuildFailed] = {}

    def home_package(self, dependent: Dependent, home: TorchBuild) -> Path:
        """The package built against its home build, once per run; BuildFailed (once too)."""
        if dependent.name not in self.homes:
            try:
                self.homes[dependent.name] = self.runner.package(dependent, home,
                                                                 self.work / _safe(dependent.name) / "home")
            except conda_package.BuildFailed as err:
                self.homes[dependent.name] = err
        found = self.homes[dependent.name]
        if isinstance(found, conda_package.BuildFailed):
            raise found
        return found

    @staticmethod
    def env_key(dependent: Dependent, column: Column) -> str:
        return f"{_safe(dependent.name)}-{_safe(column.label)}"

    def tested(self, dependent: Dependent, python: Path, cwd: Path, good: str, reason: str) -> Cell:
        """`good` (works or rebuilt) when it imports and its tests pass, else fails."""
        problem, counts = self.runner.import_and_test(dependent, python, cwd)
        cell = Cell(good, reason, counts.passed, counts.failed, counts.skipped)
        if problem:
            cell.kind, cell.reason = FAILS, f"{reason + '; ' if reason else ''}does not import: {problem}"
        elif counts.failed or not counts.passed:
            cell.kind = FAILS
            cell.reason = f"{reason + '; ' if reason else ''}{counts.first_failure or 'no test ran'}"
        return cell

    def pip_cell(self, dependent: Dependent, column: Column, cwd: Path) -> Cell:
        if not matching([column.build], "any", dependent.torch):   # the flavour is checked already
            return Cell(NEEDS_RELEASE, f"{dependent.name} {dependent.version} pairs with pytorch {dependent.torch} "
                                       f"(its entry's torch); no release of it for {column.version} is known")
        try:
            python = self.runner.pip_wheel(dependent, column.build, cwd)
        except pip_wheel.PipRefused as err:
            return Cell(NEEDS_RELEASE, str(err))
        return self.tested(dependent, python, cwd, WORKS, "")

    def conda_cell(self, dependent: Dependent, column: Column, home: TorchBuild | None, cwd: Path) -> Cell:
        if home is None or home == column.build:
            try:
                package = (self.home_package(dependent, home) if home else
                           self.runner.package(dependent, column.build, cwd / "build"))
                python = self.runner.package_env(dependent, column.build, package, self.env_key(dependent, column))
            except conda_package.BuildFailed as err:
                return Cell(FAILS if err.unsolvable else NEEDS_RELEASE,
                            f"does not build against {column.build.describe()}: {err}")
            reason = "" if home else (f"no pytorch {dependent.torch} in the channels; built against "
                                      f"{column.version}")
            return self.tested(dependent, python, cwd, WORKS if home else REBUILT, reason)
        excluded = ""
        try:
            package = self.home_package(dependent, home)
            try:
                python = self.runner.package_env(dependent, column.build, package, self.env_key(dependent, column))
                return self.tested(dependent, python, cwd, WORKS, "")
            except FeedstockError:  # its pins exclude this build: the solve fails
                excluded = f"its package for {home.version} needs {torch_pins(package)}"
        except conda_package.BuildFailed as err:
            excluded = f"it does not build against {home.version} ({err})"
        rebuild = widened(dependent, column.build) if dependent.kind == "conda-wheel" else dependent
        try:
            package = self.runner.package(rebuild, column.build, cwd / "build")
            python = self.runner.package_env(rebuild, column.build, package, self.env_key(dependent, column))
        except conda_package.BuildFailed as err:
            return Cell(FAILS if err.unsolvable else NEEDS_RELEASE,
                        f"{excluded}; the rebuild against {column.version} fails: {err}")
        except FeedstockError as err:
            return Cell(NEEDS_RELEASE, f"{excluded}; rebuilt against {column.version}, but {err}")
        return self.tested(rebuild, python, cwd, REBUILT, f"{excluded}; rebuilt against {column.version}")

    def cell(self, dependent: Dependent, column: Column) -> Cell:
        na = not_applicable(dependent.flavour, column)
        if na:
            return na
        cwd = fresh_folder(self.work / _safe(dependent.name) / _safe(column.label))
        print(f"downstream matrix: {dependent.name} {dependent.version} ({dependent.how_built}) on "
              f"{column.build.describe()}", file=sys.stderr, flush=True)
        start = time.monotonic()
        try:
            if dependent.kind == "pip-wheel":
                cell = self.pip_cell(dependent, column, cwd)
            else:
                home = next(iter(matching([c.build for c in self.columns], dependent.flavour, dependent.torch)), None)
                cell = self.conda_cell(dependent, column, home, cwd)
        except FeedstockError as err:  # an environment that cannot be made at all
            cell = Cell(FAILS, str(err))
        cell.seconds = time.monotonic() - start
        return cell


def run_matrix(options: DownstreamRequest, versions: list[str] | None = None,
               labels: list[str] | None = None) -> tuple[Matrix, int]:
    """(the matrix, exit status). With `versions` (--compare OLD NEW) only those columns, and
    both must be in the channels; with `labels` ("2.14.1 gpu"), only those columns (one cell
    at a time, for the benchmark). Status: 1 when a dependent that works on the old version is
    anything but works or rebuilt on the new one (regressions), 2/3 as a plain run."""
    chosen, options, builds = prepare(options)
    if versions:
        have = sorted({b.version for b in builds})
        missing = [v for v in versions if v not in have]
        if missing:
            raise FeedstockError(f"--compare {' '.join(versions)}: the channels hold pytorch {', '.join(have)} only; "
                                 f"build {', '.join(missing)} into a channel and pass it with --channel",
                                 exit_code=EXIT_NO_PYTORCH)
    fetch_sources(chosen, options.cache, options.catalog)
    columns = [c for c in columns_of(builds, versions) if labels is None or c.label in labels]
    matrix = Matrix(columns)
    matrix.old, matrix.new = (versions[0], versions[-1]) if versions else old_and_new(columns)
    runner = MatrixRunner(Runner(options), columns)
    for dependent in chosen:
        row = MatrixRow(dependent.name, dependent.version, dependent.how_built)
        row.cells = [runner.cell(dependent, column) for column in columns]
        matrix.rows.append(row)
    found = regressions(matrix)
    for line in found:
        error(f"regression: {line}")
    return matrix, EXIT_FAILED if found else 0
