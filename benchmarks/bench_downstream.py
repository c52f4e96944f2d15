#!/usr/bin/env python3
"""Benchmark: the dependents built and tested against our packages, and the same against a plain
pip virtual environment of the same torch.

    .venv/bin/python benchmarks/bench_downstream.py --channel CHANNEL... [--with-channel CH]... \\
        [--variant JOB.yaml] [--env gpu=PREFIX] [--venv 2.13.0=VENV]... [NAME ...]

- ours: `python -m feedstock downstream` (in-process): rattler installs our pytorch, pip adds a
  wheel, or rattler-build builds a conda package which rattler installs; then the tests;
- pip: a venv per torch version (`pip install torch==<version>` with pip's configured indexes,
  or --venv VERSION=DIR), where pip installs the wheel or builds the sdist
  (`--no-build-isolation`, as against our packages) and the same tests run.

Each dependent's time covers its install or build and its tests, not the making of the base
environment. Last line: `downstream: N dependents, M passed; time ratio X.XX` (ours / pip,
summed over the dependents both sides ran; M counts ours).

With --matrix: `feedstock downstream --matrix` (every dependent against every pytorch build of
the channels, one process, packages and environments shared), then the same cells run one by
one (each applicable cell a run of its own: a fresh work folder, package cache and, unless
--pkgs-dir, rattler cache). Prints the matrix, then per cell the two times; last line:
`downstream: D dependents x P pytorch builds; W works, R rebuilt, N needs release, F fails;
time ratio X.XX` (the matrix's wall time / the sum of the one-by-one runs).

    .venv/bin/python benchmarks/bench_downstream.py --matrix --channel CPU_CH --channel GPU_CH \
        --with-channel TOOLS_CH ... --variant JOB.yaml --env gpu=PREFIX [--pkgs-dir DIR] [NAME ...]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.links import link_or_copy  # noqa: E402
from feedstock.after_build.downstream import pip_wheel  # noqa: E402
from feedstock.dependents_catalog import Dependent, dependents_test_dir, load_catalog  # noqa: E402
from feedstock.after_build.downstream.environment import clean_environ  # noqa: E402
from feedstock.after_build.downstream.run import DownstreamRequest, run  # noqa: E402
from feedstock.after_build.downstream.sources import default_cache, fetch  # noqa: E402
from feedstock.after_build.downstream.testrun import import_error, run_pytest  # noqa: E402

CATALOG = ROOT / "recipe" / "dependents.yaml"


def make_venv(version: str, dest: Path, python: str) -> Path:
    subprocess.run([python, "-m", "venv", str(dest)], check=True)
    subprocess.run([str(dest / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    f"torch=={version}", "setuptools", "pytest"], check=True, env=clean_environ())
    return dest


def pip_side(dependent: Dependent, venv: Path, cache: Path, work: Path) -> tuple[float, str]:
    """(seconds, result) of installing or building the dependent in the venv and testing it."""
    python = venv / "bin" / "python"
    cwd = work / dependent.name
    shutil.rmtree(cwd, ignore_errors=True)
    cwd.mkdir(parents=True)
    start = time.monotonic()
    try:
        if dependent.kind == "pip-wheel":
            pip_wheel.install(python, dependent, [], cwd)
        else:
            target = fetch(dependent.source, cache)
            extra = ["--no-build-isolation"] if dependent.kind == "conda-sdist" else []
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                            *extra, str(target), *dependent.test_requires], check=True, cwd=cwd,
                           env=clean_environ({"MAX_JOBS": "2", **dependent.build_env}, python))
    except (subprocess.CalledProcessError, pip_wheel.PipRefused) as err:
        return time.monotonic() - start, f"install failed: {err}"
    if import_error(python, dependent.imports, cwd):
        return time.monotonic() - start, "import failed"
    if dependent.test_pyargs:
        counts = run_pytest(python, list(dependent.test_pyargs), cwd, dict(dependent.test_env), pyargs=True)
    else:
        for name in dependent.test_files:
            shutil.copy2(dependent_file(name), cwd / name)
        counts = run_pytest(python, list(dependent.test_files), cwd, dict(dependent.test_env))
    result = "passed" if counts.failed == 0 and counts.passed else "failed"
    return time.monotonic() - start, f"{result} ({counts.passed}/{counts.failed}/{counts.skipped})"


def dependent_file(name: str) -> Path:
    return dependents_test_dir(CATALOG) / name


def matrix_bench(options: DownstreamRequest, work: Path) -> int:
    """The matrix, then its applicable cells one by one; the issue's last line."""
    from feedstock.after_build.downstream.matrix_run import run_matrix
    from feedstock.after_build.downstream.matrix_table import format_matrix

    options.work, options.cache = work / "matrix", work / "cache-matrix"
    _share_sources(options.cache)
    start = time.monotonic()
    matrix, status = run_matrix(options)
    matrix_seconds = time.monotonic() - start
    print(format_matrix(matrix), flush=True)
    alone_total = 0.0
    print(f"{'cell':<40} {'matrix':>8} {'alone':>8}  kind (alone)")
    for row in matrix.rows:
        for column, cell in zip(matrix.columns, row.cells):
            if cell.kind == "n/a":
                continue
            name = f"{row.name}-{column.label}".replace(" ", "_")
            one = replace(options, names=[row.name], work=work / "alone" / name, cache=work / "cache-alone" / name,
                          package_cache=False)
            _share_sources(one.cache)
            start = time.monotonic()
            alone, _ = run_matrix(one, labels=[column.label])
            seconds = time.monotonic() - start
            alone_total += seconds
            print(f"{row.name + ' on ' + column.label:<40} {cell.seconds:>7.0f}s {seconds:>7.0f}s  "
                  f"{cell.kind} ({alone.rows[0].cells[0].kind})", flush=True)
    counts = matrix.counts()
    ratio = matrix_seconds / alone_total if alone_total else float("nan")
    print(f"downstream: {len(matrix.rows)} dependents x {len(matrix.columns)} pytorch builds; "
          f"{counts['works']} works, {counts['rebuilt']} rebuilt, {counts['needs release']} needs release, "
          f"{counts['fails']} fails; time ratio {ratio:.2f}")
    return status


def _share_sources(cache: Path) -> None:
    """The PyPI downloads of the default cache, linked in: the runs share them, not their packages."""
    source = default_cache() / "sources"
    if source.is_dir():
        shutil.copytree(source, cache / "sources", copy_function=link_or_copy, dirs_exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--channel", type=Path, action="append", required=True,
                        help="a channel with our packages (repeatable: a CPU and a GPU build folder)")
    parser.add_argument("--with-channel", type=Path, action="append", default=[])
    parser.add_argument("--variant", type=Path)
    parser.add_argument("--env", action="append", default=[], metavar="FLAVOUR=PREFIX")
    parser.add_argument("--venv", action="append", default=[], metavar="VERSION=DIR",
                        help="an existing venv with torch VERSION (default: one is made)")
    parser.add_argument("--python", default=shutil.which("python3.11") or sys.executable,
                        help="the interpreter of the venvs (the wheels are cp311)")
    parser.add_argument("--work", type=Path)
    parser.add_argument("--matrix", action="store_true",
                        help="the matrix against every pytorch build, then its cells one by one")
    parser.add_argument("--pkgs-dir", type=Path, help="rattler's package cache for every run (--matrix)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-downstream-"))
    cache = default_cache()
    envs = {k: Path(v) for k, _, v in (e.partition("=") for e in args.env)}
    options = DownstreamRequest(catalog=CATALOG, channels=args.channel, with_channels=args.with_channel, names=args.names,
                      work=work / "ours", cache=cache, variant=args.variant, envs=envs, pkgs=args.pkgs_dir)
    if args.matrix:
        return matrix_bench(options, work)
    rows, _ = run(options)
    catalog = {d.name: d for d in load_catalog(CATALOG)}
    venvs = {k: Path(v) for k, _, v in (e.partition("=") for e in args.venv)}
    ours_total = pip_total = 0.0
    print(f"{'dependent':<15} {'ours':>8} {'pip':>8}  ours result / pip result")
    for row in rows:
        if row.result in ("skipped", "unknown"):
            print(f"{row.name:<15} {'-':>8} {'-':>8}  {row.result}: {row.note}")
            continue
        version = row.against.split()[0]
        if version not in venvs:
            venvs[version] = make_venv(version, work / f"venv-{version}", args.python)
        seconds, result = pip_side(catalog[row.name], venvs[version], cache, work / "pip")
        ours_total += row.seconds
        pip_total += seconds
        print(f"{row.name:<15} {row.seconds:>7.0f}s {seconds:>7.0f}s  {row.result} "
              f"({row.passed}/{row.failed}/{row.skipped}) / {result}", flush=True)
    ratio = ours_total / pip_total if pip_total else float("nan")
    passed = sum(row.ok for row in rows)
    print(f"downstream: {len(rows)} dependents, {passed} passed; time ratio {ratio:.2f}")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
