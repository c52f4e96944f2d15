"""Command line of ``python -m feedstock downstream`` (wired into feedstock.cli)."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from ...errors import FeedstockError
from .catalog import CATALOG
from .sources import default_cache
from .table import format_table, summary

HELP = """\
Build and test the dependents of recipe/dependents.yaml (packages written elsewhere: a pip
wheel, a C++ extension from its sdist, a pure-Python package) against the pytorch of a channel,
and print one row per dependent: version, how it was built, the pytorch build it ran against,
whether it imported, its tests passed/failed/skipped, the time. A dependent whose pytorch
flavour or version the channel lacks is `skipped` with the reason. rattler installs our pytorch
into fresh environments; rattler-build builds the conda kinds (their PyPI files are cached in
the cache folder). Exit status: 0 none failed, 1 a dependent failed, 2 bad input (an unknown
name: the others still run), 3 the channel has no pytorch (the table is still printed).
Example: python -m feedstock downstream --channel build_artifacts torch-scatter einops"""


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
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")


def _envs(values: list[str]) -> dict[str, Path]:
    envs = {}
    for value in values:
        flavour, sep, prefix = value.partition("=")
        if not sep or flavour not in ("cpu", "gpu", "rocm") or not (Path(prefix) / "bin" / "python").exists():
            raise FeedstockError(f"--env {value}: want FLAVOUR=PREFIX with FLAVOUR cpu, gpu or rocm and "
                                 "a prefix that has bin/python")
        envs[flavour] = Path(prefix)
    return envs


def run(args: argparse.Namespace, root: Path) -> int:
    from .run import Options, run as run_dependents

    work = args.work or Path(tempfile.mkdtemp(prefix="feedstock-downstream-"))
    options = Options(catalog=args.catalog or root / CATALOG, channels=args.channel or [root / "build_artifacts"],
                      with_channels=list(args.with_channel), names=list(args.names), work=work,
                      cache=args.cache or default_cache(), variant=args.variant, envs=_envs(args.env))
    try:
        rows, status = run_dependents(options)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps([row.to_dict() for row in rows], indent=1))
    print(summary(rows))
    sys.stdout.flush()
    return status
