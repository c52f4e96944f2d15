"""Run the selected dependents against a channel and make one table row each.

Bad input never hides the table: an unknown name is a row of its own, a channel without
pytorch makes every row `skipped` with the reason, a failing build is a `failed` row with its
first error line. Each problem is also one `error:` line on stderr."""
from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...errors import FeedstockError
from localbuild.suggest import close_names
from . import conda_package, pip_wheel
from .catalog import Dependent, load_catalog, dependents_test_dir
from .channel import TorchBuild, indexed_view, matching, torch_builds
from .environment import cuda_of, install, torch_specs
from .sources import fetch
from .table import Row
from .testrun import TestCounts, import_error, run_pytest

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NO_PYTORCH = 1, 2, 3


@dataclass
class Options:
    catalog: Path
    channels: list[Path]  # with our packages (a CPU and a GPU build folder, say)
    with_channels: list[Path] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    work: Path = Path("downstream-work")
    cache: Path = Path(".")
    variant: Path | None = None
    envs: dict[str, Path] = field(default_factory=dict)  # flavour -> an existing environment to use


def error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def against(build: TorchBuild) -> str:
    return f"{build.version} {build.build.split('_h')[0]}"


class Runner:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.channels = [*options.channels, *options.with_channels]
        # per run: local builds reuse file names with new contents, a lasting cache could serve stale ones
        self.pkgs = options.work / "pkgs"

    def environment(self, key: str, build: TorchBuild, specs: list[str], extra_channels: list[Path] = ()) -> Path:
        prefix = self.options.work / "envs" / key
        if prefix.exists():
            shutil.rmtree(prefix)
        install([*extra_channels, *self.channels], [*torch_specs(build), *specs], prefix, self.pkgs, cuda_of(build))
        return prefix

    def test(self, dependent: Dependent, python: Path, cwd: Path) -> TestCounts:
        env = dict(dependent.test_env)
        if dependent.test_pyargs:
            return run_pytest(python, list(dependent.test_pyargs), cwd, env, pyargs=True)
        for name in dependent.test_files:
            shutil.copy2(dependents_test_dir(self.options.catalog) / name, cwd / name)
        return run_pytest(python, list(dependent.test_files), cwd, env)

    def pip_wheel(self, dependent: Dependent, build: TorchBuild, cwd: Path) -> Path:
        prefix = self.options.envs.get(build.flavour) or self.environment(f"pip-{build.flavour}", build, ["pip", "pytest"])
        python = prefix / "bin" / "python"
        extra = [] if not import_error(python, ("pytest",), cwd) else ["pytest"]
        pip_wheel.install(python, dependent, extra, cwd)
        return python

    def conda_package(self, dependent: Dependent, build: TorchBuild, cwd: Path) -> Path:
        source = fetch(dependent.source, self.options.cache)
        test_files = [dependents_test_dir(self.options.catalog) / f for f in dependent.test_files]
        package, _ = conda_package.build_package(dependent, build, source, test_files, self.channels,
                                                 cwd / "build", self.options.variant)
        if dependent.kind == "conda-sdist":
            pin = libtorch_pin_problem(conda_package.package_depends(package), build.version)
            if pin:
                raise conda_package.BuildFailed(pin)
        prefix = self.environment(dependent.name, build,
                                  [f"{dependent.name} =={dependent.version}", "pytest", *dependent.test_requires],
                                  extra_channels=[package.parent.parent])
        return prefix / "bin" / "python"

    def one(self, dependent: Dependent, build: TorchBuild) -> Row:
        row = Row(dependent.name, dependent.version, dependent.how_built, against(build))
        cwd = self.options.work / dependent.name
        if cwd.exists():
            shutil.rmtree(cwd)
        cwd.mkdir(parents=True)
        start = time.monotonic()
        try:
            make = self.pip_wheel if dependent.kind == "pip-wheel" else self.conda_package
            python = make(dependent, build, cwd)
            problem = import_error(python, dependent.imports, cwd)
            row.imported = "no" if problem else "yes"
            if problem:
                row.note = problem
            else:
                counts = self.test(dependent, python, cwd)
                row.passed, row.failed, row.skipped = counts.passed, counts.failed, counts.skipped
                row.result = "passed" if counts.failed == 0 and counts.passed > 0 else "failed"
                row.note = counts.first_failure or ("" if counts.passed else "no test ran")
        except (pip_wheel.PipRefused, conda_package.BuildFailed, FeedstockError) as err:
            row.note = str(err)
        row.seconds = time.monotonic() - start
        return row


def libtorch_pin_problem(depends: list[str], version: str) -> str:
    """'' when the package depends on libtorch >=x.y,<x.(y+1) (libtorch's run_exports), else why not."""
    major, minor = version.split(".")[:2]
    for dep in depends:
        name, _, spec = dep.partition(" ")
        if name == "libtorch" and f">={major}.{minor}" in spec and f"<{major}.{int(minor) + 1}" in spec:
            return ""
    found = [d for d in depends if d.startswith(("libtorch", "pytorch"))]
    return (f"built, but its depends lack a libtorch >={major}.{minor},<{major}.{int(minor) + 1} pin "
            f"(no stable C++ ABI; libtorch's run_exports should add it): {', '.join(found) or 'no libtorch/pytorch'}")


def select(dependents: list[Dependent], names: list[str]) -> list[Dependent]:
    """The dependents asked for, in catalog order; a name the catalog lacks is bad input,
    refused before anything runs."""
    if not names:
        return dependents
    known = {d.name: d for d in dependents}
    unknown = [n for n in names if n not in known]
    if unknown:
        close = close_names(unknown[0], list(known), limit=1)
        hint = f"did you mean {close[0]}? " if close else ""
        more = f" (and {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else ""
        raise FeedstockError(f"unknown dependent {unknown[0]!r}{more}; {hint}known: {', '.join(known)} "
                             "(recipe/dependents.yaml)", exit_code=EXIT_BAD_INPUT)
    return [d for d in dependents if d.name in names]


def run(options: Options) -> tuple[list[Row], int]:
    """(one row per dependent asked for, exit status)."""
    chosen = select(load_catalog(options.catalog), options.names)
    rows: list[Row] = []
    status = 0
    try:
        # the channels the user named are only read: indexed views of our own stand in for them
        views, given = options.work / "channels", options.channels
        options = replace(options, channels=[indexed_view(c, views) for c in options.channels],
                          with_channels=[indexed_view(c, views) for c in options.with_channels])
        builds = [build for channel in options.channels for build in torch_builds(channel)]
        if not builds:
            raise FeedstockError(f"channel {', '.join(map(str, given))} has no pytorch package; build one into it first "
                                 "(python build-locally.py) or pass --channel", exit_code=EXIT_NO_PYTORCH)
    except FeedstockError as err:
        error(str(err))
        rows += [Row(d.name, d.version, d.how_built, result="skipped", note="no pytorch to run against")
                 for d in chosen]
        return rows, err.exit_code
    runner = Runner(options)
    for dependent in chosen:
        fits = matching(builds, dependent.flavour, dependent.torch)
        if not fits:
            have = ", ".join(sorted({f"{b.flavour} {b.version}" for b in builds}))
            rows.append(Row(dependent.name, dependent.version, dependent.how_built, result="skipped",
                            note=f"needs pytorch {dependent.torch} ({dependent.flavour}); the channel has {have}"))
            continue
        print(f"downstream: {dependent.name} {dependent.version} ({dependent.how_built}) against "
              f"{fits[0].describe()}", file=sys.stderr, flush=True)
        row = runner.one(dependent, fits[0])
        if not row.ok:
            error(f"{dependent.name}: {row.note}")
            status = status or EXIT_FAILED
        rows.append(row)
    return rows, status
