"""Command line of ``python -m feedstock downstream`` (wired into feedstock.cli)."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from common.path_kinds import folder_problem

from ...atomic_files import replace_files
from ...errors import FeedstockError
from .. import compile_cache as compiles
from ...dependents_catalog import CATALOG
from .sources import default_cache
from .table import format_table, summary

HELP = """\
Build and test the dependents of recipe/dependents.yaml (packages written elsewhere: a pip
wheel, a C++ extension from its sdist, a pure-Python package) against the pytorch of a channel,
and print one row per dependent: version, how it was built, the pytorch build it ran against,
whether it imported, its tests passed/failed/skipped, the time. A dependent whose pytorch
flavour or version the channel lacks is `skipped` with the reason. rattler installs our pytorch
into fresh environments; rattler-build builds the conda kinds (their PyPI files are cached in
the cache folder; an sdist's compiles go through ccache where it is installed, so the same
sources against the same torch come from --compile-cache). Exit status: 0 none failed, 1 a dependent failed, 2 bad input (an unknown
name: the others still run), 3 the channel has no pytorch (the table is still printed).

--matrix runs each dependent against every pytorch build of the channels (one column per
version and flavour) and prints one cell each: works (installs unchanged, imports, tests pass),
rebuilt (its pins exclude that pytorch; a rebuild against it passes), needs release (its own
requirements exclude it, or the rebuild fails), fails (installs, but the tests fail), n/a (the
flavour does not apply); every cell but works says why. --compare OLD NEW is the matrix of
those two versions only, for a bump (both must be in the channels); --summary FILE appends it
as Markdown (e.g. $GITHUB_STEP_SUMMARY). In both, exit 1 means a regression: a dependent that
works on the old version is anything but works or rebuilt on the new one.
Example: python -m feedstock downstream --channel build_artifacts torch-scatter einops
         python -m feedstock downstream --channel old_build --channel new_build --compare 2.13.0 2.14.1"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("downstream", help="build and test dependents against a channel's pytorch",
                            description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="dependents to run (default: all of recipe/dependents.yaml)")
    parser.add_argument("--channel", type=Path, action="append", default=[],
                        help="a channel with our packages (default: build_artifacts/ of the feedstock; "
                             "repeatable, e.g. a CPU and a GPU build folder)")
    parser.add_argument("--with-channel", type=Path, action="append", default=[], metavar="CHANNEL",
                        help="a further local channel for everything else the builds need (repeatable)")
    parser.add_argument("--variant", type=Path, help="a variant file for rattler-build (a .ci_support job)")
    parser.add_argument("--env", action="append", default=[], metavar="FLAVOUR=PREFIX",
                        help="pip wheels of that flavour (cpu, gpu) go into this existing environment "
                             "instead of a fresh one")
    parser.add_argument("--catalog", type=Path, help="the dependents file (default: recipe/dependents.yaml)")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one, removed after)")
    parser.add_argument("--cache", type=Path, help=f"the PyPI downloads (default: {default_cache()})")
    parser.add_argument("--compile-cache", type=Path, metavar="DIR",
                        help=f"ccache's folder for the sdist builds (default: {compiles.default_folder()} where "
                             "ccache is installed): the same sources against the same torch compile from it")
    parser.add_argument("--no-compile-cache", action="store_true", help="compile the sdists without ccache")
    parser.add_argument("--json", type=Path, help="also write the rows (the matrix) as JSON to this file")
    parser.add_argument("--matrix", action="store_true",
                        help="every dependent against every pytorch build of the channels, one table")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                        help="the matrix of two pytorch versions of the channels (a bump's downstream cost)")
    parser.add_argument("--summary", type=Path, metavar="FILE",
                        help="with --matrix/--compare: append the table as Markdown to FILE")
    parser.add_argument("--pkgs-dir", type=Path, metavar="DIR",
                        help="rattler's package cache (default: a fresh one per run; only for channels "
                             "whose file names never change content)")


def _envs(values: list[str]) -> dict[str, Path]:
    envs = {}
    for value in values:
        flavour, sep, prefix = value.partition("=")
        if not sep or flavour not in ("cpu", "gpu", "rocm") or not (Path(prefix) / "bin" / "python").exists():
            raise FeedstockError(f"--env {value}: want FLAVOUR=PREFIX with FLAVOUR cpu, gpu or rocm and "
                                 "a prefix that has bin/python")
        envs[flavour] = Path(prefix)
    return envs


def _compare(values: list[str] | None) -> list[str] | None:
    from ...dependents_catalog import version_spec_problem

    if not values:
        return None
    bad = [v for v in values if version_spec_problem(v) or any(c in v for c in "<>=*,|! ")]
    if bad:
        raise FeedstockError(f"--compare {' '.join(values)}: {bad[0]!r} is not a pytorch version (e.g. 2.14.1)")
    if values[0] == values[1]:
        raise FeedstockError(f"--compare {' '.join(values)}: give two different versions, the old one first")
    return list(values)


def run(args: argparse.Namespace, root: Path) -> int:
    from .run import DownstreamRequest, run as run_dependents

    versions = _compare(args.compare)
    matrix_mode = args.matrix or versions is not None
    if args.summary and not matrix_mode:
        raise FeedstockError("--summary needs --matrix or --compare")
    if args.summary and args.summary.is_dir():
        raise FeedstockError(f"--summary {args.summary} is a folder; give a file to append to")
    for option, folder in (("--work", args.work), ("--cache", args.cache), ("--pkgs-dir", args.pkgs_dir)):
        problem = folder and folder_problem(folder, may_be_missing=True)
        if problem:   # a file, /dev/null, /proc/x: one line before anything is made in it
            raise FeedstockError(f"{option} {folder} {problem}")
    work = args.work or Path(tempfile.mkdtemp(prefix="feedstock-downstream-"))
    try:  # from here on: an option refused below must not leave the temporary folder behind
        options = DownstreamRequest(catalog=args.catalog or root / CATALOG, channels=args.channel or [root / "build_artifacts"],
                          with_channels=list(args.with_channel), names=list(args.names), work=work,
                          cache=args.cache or default_cache(), variant=args.variant, envs=_envs(args.env),
                          pkgs=args.pkgs_dir,
                          compile_cache=compiles.choose(args.compile_cache, args.no_compile_cache))
        if matrix_mode:
            return _matrix(options, versions, args)
        rows, status = run_dependents(options)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(format_table(rows))
    if args.json:
        replace_files({args.json: json.dumps([row.to_dict() for row in rows], indent=1)})
    print(summary(rows))
    sys.stdout.flush()
    return status


def _matrix(options, versions: list[str] | None, args: argparse.Namespace) -> int:
    from .matrix_run import run_matrix
    from .matrix_table import format_markdown, format_matrix, matrix_json, summary_line

    matrix, status = run_matrix(options, versions)
    print(format_matrix(matrix))
    files = {}
    if args.json:
        files[args.json] = json.dumps(matrix_json(matrix), indent=1)
    if args.summary:
        before = args.summary.read_text(errors="replace") if args.summary.is_file() else ""
        title = f"Downstream: pytorch {matrix.old} -> {matrix.new}"
        files[args.summary] = before + ("\n" if before and not before.endswith("\n") else "") + \
            format_markdown(matrix, title)
    replace_files(files)
    print(summary_line(matrix))
    sys.stdout.flush()
    return status
