#!/usr/bin/env python3
"""rattler-build's `build` (and a channel `index`) through py-rattler-build, for
`build-locally.py --native --tool rattler-build` on a host without the rattler-build executable.

Takes the subset of rattler-build's command line that scripts/build_steps.sh passes:

    rattler_build_py.py build --recipe R -m VARIANTS [--ignore-recipe-variants] --output-dir O [-c CH]...
    rattler_build_py.py index DIR
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def index_channel(channel: Path) -> None:
    """repodata.json for every subdir of CHANNEL (an empty noarch one too: solvers want it)."""
    import asyncio

    from rattler.index import index_fs

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    result = index_fs(channel)
    if asyncio.iscoroutine(result):
        asyncio.run(result)
    if not (channel / "noarch" / "repodata.json").is_file():
        raise RuntimeError(f"rattler index wrote no {channel / 'noarch' / 'repodata.json'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rattler_build_py.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a recipe.yaml (rattler-build build)")
    build.add_argument("--recipe", "-r", type=Path, required=True)
    build.add_argument("--variant-config", "-m", action="append", default=[])
    build.add_argument("--ignore-recipe-variants", action="store_true")
    build.add_argument("--output-dir", type=Path, required=True)
    build.add_argument("--channel", "-c", action="append", default=[])
    build.add_argument("--test", choices=("skip", "native", "native-and-emulated"))
    index = commands.add_parser("index", help="write repodata.json for a channel folder")
    index.add_argument("channel", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "index":
            index_channel(args.channel)
            # py-rattler's tokio threads may still call into Python while the interpreter
            # finalizes ("PyGILState_Release: thread state must be current", SIGABRT/SIGSEGV in
            # about 1 run of 10 here, after repodata.json is written). Nothing is left to clean
            # up, so leave without finalizing.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        from rattler_build.cli_api import build_recipes

        import warnings

        warnings.simplefilter("ignore", DeprecationWarning)  # the one call that shares a staging
        build_recipes([args.recipe], channel=args.channel or None, variant_config=args.variant_config,
                      ignore_recipe_variants=args.ignore_recipe_variants, output_dir=args.output_dir,
                      test=args.test)
    except ImportError as err:
        print(f"error: {err}; install py-rattler-build (requirements-dev.txt)", file=sys.stderr)
        return 3
    except Exception as err:  # rattler-build's own errors: one line, its log went to stderr
        print(f"error: rattler-build failed: {' '.join(str(err).split())[:400]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
