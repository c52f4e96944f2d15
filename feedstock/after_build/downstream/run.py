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
from common.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_USAGE
from common.suggest import did_you_mean
from . import conda_package, pip_wheel
from ...dependents_catalog import Dependent, load_catalog, dependents_test_dir
from .channel import TorchBuild, first_for, indexed_view, matching, torch_builds
from .environment import cuda_of, install, torch_specs
from .sources import fetch
from .table import Row
from .testrun import TestCounts, import_error, run_pytest

EXIT_BAD_INPUT, EXIT_NO_PYTORCH = EXIT_USAGE, EXIT_ENVIRONMENT


@dataclass
class DownstreamRequest:
    catalog: Path
    channels: list[Path]  # with our packages (a CPU and a GPU build folder, say)
    with_channels: list[Path] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    work: Path = Path("downstream-work")
    cache: Path = Path(".")
    variant: Path | None = None
    envs: dict[str, Path] = field(default_factory=dict)  # flavour -> an existing environment to use
    pkgs: Path | None = None  # rattler's package cache (default: work/pkgs, fresh per run)
    package_cache: bool = True  # reuse a dependent's package built before from the same inputs (cache/packages)
    compile_cache: Path | None = None  # ccache's folder for the sdist builds (after_build/compile_cache.py)


def error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def against(build: TorchBuild) -> str:
    return f"{build.version} {build.build.split('_h')[0]}"


class Runner:
    def __init__(self, options: DownstreamRequest) -> None:
        self.options = options
        self.channels = [*options.channels, *options.with_channels]
        # per run unless --pkgs-dir: local builds reuse file names with new contents, a lasting
        # cache could serve stale ones
        self.pkgs = options.pkgs or options.work / "pkgs"

    def environment(self, key: str, build: TorchBuild, specs: list[str], extra_channels: list[Path] = ()) -> Path:
        prefix = self.options.work / "envs" / key
        if prefix.exists():
            shutil.rmtree(prefix)
        install([*extra_channels, *first_for(build, self.channels)], [*torch_specs(build), *specs], prefix, self.pkgs,
                cuda_of(build))
        return prefix

    def test(self, dependent: Dependent, python: Path, cwd: Path) -> TestCounts:
        env = dict(dependent.test_env)
        if dependent.test_pyargs:
            return run_pytest(python, list(dependent.test_pyargs), cwd, env, pyargs=True)
        for name in dependent.test_files:
            shutil.copy2(dependents_test_dir(self.options.catalog) / name, cwd / name)
        return run_pytest(python, list(dependent.test_files), cwd, env)

    def pip_prefix(self, build: TorchBuild) -> Path:
        """--env's prefix of this flavour when it holds this very pytorch build, else a fresh
        environment of the build with pip and pytest."""
        given = self.options.envs.get(build.flavour)
        if given and list((given / "conda-meta").glob(f"pytorch-{build.version}-{build.build}.json")):
            return given
        if given:
            print(f"downstream: --env {build.flavour}={given} holds no {build.describe()}; "
                  "using a fresh environment", file=sys.stderr, flush=True)
        return self.environment(f"pip-{build.version}-{build.build}", build, ["pip", "pytest"])

    def pip_wheel(self, dependent: Dependent, build: TorchBuild, cwd: Path) -> Path:
        python = self.pip_prefix(build) / "bin" / "python"
        extra = [] if not import_error(python, ("pytest",), cwd) else ["pytest"]
        pip_wheel.install(python, dependent, extra, cwd)
        return python

    def package(self, dependent: Dependent, build: TorchBuild, folder: Path) -> Path:
        """The dependent's conda package built against `build` in `folder` (or taken from the
        cache's packages/, built there before from the same inputs); BuildFailed."""
        source = fetch(dependent.source, self.options.cache, self.options.catalog)
        test_files = [dependents_test_dir(self.options.catalog) / f for f in dependent.test_files]
        package, _ = conda_package.build_package(dependent, build, source, test_files, first_for(build, self.channels),
                                                 folder, self.options.variant,
                                                 cache=self.options.cache if self.options.package_cache else None,
                                                 compile_cache=self.options.compile_cache)
        return package

    def package_env(self, dependent: Dependent, build: TorchBuild, package: Path, key: str) -> Path:
        """A fresh environment with this package and that pytorch build; its python.
        FeedstockError when they cannot be solved together."""
        prefix = self.environment(key, build, [f"{dependent.name} =={dependent.version}", "pytest",
                                               *dependent.test_requires], extra_channels=[package.parent.parent])
        return prefix / "bin" / "python"

    def conda_package(self, dependent: Dependent, build: TorchBuild, cwd: Path) -> Path:
        package = self.package(dependent, build, cwd / "build")
        if dependent.kind == "conda-sdist":
            pin = libtorch_pin_problem(conda_package.package_depends(package), build.version)
            if pin:
                raise conda_package.BuildFailed(pin)
        return self.package_env(dependent, build, package, dependent.name)

    def import_and_test(self, dependent: Dependent, python: Path, cwd: Path) -> tuple[str, TestCounts]:
        """(the import error or '', the test counts: none when it did not import)."""
        problem = import_error(python, dependent.imports, cwd)
        return problem, (TestCounts() if problem else self.test(dependent, python, cwd))

    def one(self, dependent: Dependent, build: TorchBuild) -> Row:
        row = Row(dependent.name, dependent.version, dependent.how_built, against(build))
        cwd = fresh_folder(self.options.work / dependent.name)
        start = time.monotonic()
        try:
            make = self.pip_wheel if dependent.kind == "pip-wheel" else self.conda_package
            python = make(dependent, build, cwd)
            problem, counts = self.import_and_test(dependent, python, cwd)
            row.imported = "no" if problem else "yes"
            if problem:
                row.note = problem
            else:
                row.passed, row.failed, row.skipped = counts.passed, counts.failed, counts.skipped
                row.result = "passed" if counts.failed == 0 and counts.passed > 0 else "failed"
                row.note = counts.first_failure or ("" if counts.passed else "no test ran")
        except (pip_wheel.PipRefused, conda_package.BuildFailed, FeedstockError) as err:
            row.note = str(err)
        row.seconds = time.monotonic() - start
        return row


def fresh_folder(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


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
        phrase = did_you_mean(unknown[0], list(known))
        hint = f"{phrase} " if phrase else ""
        more = f" (and {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else ""
        raise FeedstockError(f"unknown dependent {unknown[0]!r}{more}; {hint}known: {', '.join(known)} "
                             "(recipe/dependents.yaml)", exit_code=EXIT_BAD_INPUT)
    return [d for d in dependents if d.name in names]


def prepare(options: DownstreamRequest) -> tuple[list[Dependent], DownstreamRequest, list[TorchBuild]]:
    """(the dependents asked for, the options with indexed views of the channels, every pytorch
    build of them). The user's channels are only read; the sources of the conda kinds are
    fetched and checked (sha256) before anything builds. FeedstockError: bad input (2) or a
    channel without pytorch, a download that failed (3)."""
    chosen = select(load_catalog(options.catalog), options.names)
    views, given = options.work / "channels", options.channels
    options = replace(options, channels=[indexed_view(c, views) for c in options.channels],
                      with_channels=[indexed_view(c, views) for c in options.with_channels])
    builds = [build for channel in options.channels for build in torch_builds(channel)]
    if not builds:
        raise FeedstockError(f"channel {', '.join(map(str, given))} has no pytorch package; build one into it first "
                             "(python build-locally.py) or pass --channel", exit_code=EXIT_NO_PYTORCH)
    return chosen, options, builds


def fetch_sources(dependents: list[Dependent], cache: Path, catalog: Path) -> None:
    """Every source in the cache and checked against `catalog`, before anything builds."""
    for dependent in dependents:
        if dependent.source is not None:
            fetch(dependent.source, cache, catalog)


def run(options: DownstreamRequest) -> tuple[list[Row], int]:
    """(one row per dependent asked for, exit status)."""
    chosen = select(load_catalog(options.catalog), options.names)
    rows: list[Row] = []
    status = 0
    try:
        chosen, options, builds = prepare(options)
        fetch_sources(chosen, options.cache, options.catalog)
    except FeedstockError as err:
        error(str(err))
        reason = "no pytorch to run against" if err.exit_code == EXIT_NO_PYTORCH else "not run: see the error line"
        rows += [Row(d.name, d.version, d.how_built, result="skipped", note=reason) for d in chosen]
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
