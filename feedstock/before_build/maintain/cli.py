"""Command line of ``bump``, ``deps`` and ``patches {check,refresh}`` (wired into feedstock.cli)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ...errors import FeedstockError

COMMANDS = ("bump", "deps", "patches")

BUMP_HELP = """\
Move every recipe (recipe/meta.yaml, and recipe/recipe.yaml when it exists) to a new PyTorch
release: the version, the source sha256, build number 0, and the pins that follow the release
(triton from .ci/docker/triton_version.txt or the wheel, run requirements' lower bounds and the
minimum Python from --wheel). Every patch is first applied in recipe order to the new source;
if one fails, nothing is written and the command exits 1 (unless --skip-patch-check). Only the
lines that carry those values change; .ci_support/ is rerendered when it is out of date after.
Refused, with nothing written: a version that is not newer (unless --allow-older), a file that
is not a tarball or has no single top directory pytorch-v<VERSION>/, a --sha256 that does not match.
Release candidates (2.14.0-rc1) need the recipe's rc rule ({% if "rc" in version %} source).
Example: python -m feedstock bump 2.14.0 --source pytorch-v2.14.0.tar.gz --wheel torch-2.14.0-...whl"""

DEPS_HELP = """\
Print the vendored-dependency table: one row per dependency with the upstream version, our pin
(recipes and pinning file), the newest version in the channel (--repodata files) and where each
number came from. Upstream: a git checkout's `git submodule status --recursive` with
`git describe --tags`, or a release tarball's version files (NCCL version.mk, CMake project
versions, fmt/protobuf version headers); CUDA/MAGMA/MKL from .ci/docker scripts; triton; the
wheel's Requires-Dist and Requires-Python. Rows whose pin and upstream differ in major.minor
are flagged. --write-docs replaces the table between the deps-table markers in
docs/maintaining.md (the committed table; a test fails when it is stale)."""

PATCHES_HELP = """\
check: apply the recipe's patches, in recipe order, to a source (checkout, unpacked tree or
tarball) and report per patch whether it applies, with offsets and fuzz; exit 1 if one fails.
refresh: regenerate recipe/patches/ from the commits BASE..HEAD of a git branch (format-patch
without hashes, dates or signature), keeping the recipe's names and numbering where the subject
is unchanged, and update the patch list of every recipe (comments kept)."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    bump = sub.add_parser("bump", help="move the recipes to a new PyTorch release", description=BUMP_HELP,
                          formatter_class=raw)
    bump.add_argument("version", help="the new release, e.g. 2.14.0 or 2.14.0-rc1")
    bump.add_argument("--source", required=True, help="the release tarball pytorch-vVERSION.tar.gz, or its URL")
    bump.add_argument("--wheel", type=Path, help="a torch wheel of the release: run requirements and Python pins")
    bump.add_argument("--sha256", help="expected sha256 of the tarball; refused if it differs")
    bump.add_argument("--dry-run", action="store_true", help="print the unified diff; write nothing")
    bump.add_argument("--skip-patch-check", action="store_true", help="write even if a patch does not apply")
    bump.add_argument("--allow-older", action="store_true",
                      help="also move to an older or the same release (a revert; a copy for an older wheel)")

    deps = sub.add_parser("deps", help="print the vendored-dependency table", description=DEPS_HELP,
                          formatter_class=raw)
    deps.add_argument("--source", type=Path, help="a PyTorch git checkout, unpacked tree or release tarball")
    deps.add_argument("--wheel", type=Path, help="a torch wheel: Requires-Dist and Requires-Python rows")
    deps.add_argument("--repodata", type=Path, action="append", default=[], metavar="FILE",
                      help="a channel's repodata.json (repeatable): the channel column")
    deps.add_argument("--format", choices=("md", "json"), default="md", help="output format (default: md)")
    deps.add_argument("--write-docs", action="store_true",
                      help="replace the table between the deps-table markers in docs/maintaining.md")
    # the table lived in README.md before docs/ existed; the old spelling keeps scripts working
    deps.add_argument("--write-readme", dest="write_docs", action="store_true", help=argparse.SUPPRESS)

    patches = sub.add_parser("patches", help="check or refresh the recipe's patch series", description=PATCHES_HELP,
                             formatter_class=raw)
    actions = patches.add_subparsers(dest="patches_command", metavar="{check,refresh}")
    check = actions.add_parser("check", help="does every patch apply to a source?")
    check.add_argument("--source", type=Path, required=True, help="a PyTorch checkout, unpacked tree or tarball")
    refresh = actions.add_parser("refresh", help="regenerate recipe/patches/ from a git branch")
    refresh.add_argument("--source-git", type=Path, required=True, help="PyTorch checkout, patches committed on HEAD")
    refresh.add_argument("--base", required=True, help="the release tag (or commit) the patches apply to")


def only_reads(args: argparse.Namespace) -> bool:
    """Whether this invocation only reads the feedstock's files (it then holds the feedstock's
    lock shared: feedstock.atomic_files.feedstock_lock)."""
    if args.command == "bump":
        return bool(args.dry_run)
    if args.command == "deps":
        return not args.write_docs
    return args.command == "patches" and args.patches_command == "check"


def run(args: argparse.Namespace, root: Path) -> int:
    if args.command == "bump":
        return _bump(args, root)
    if args.command == "deps":
        return _deps(args, root)
    if args.patches_command == "check":
        return _patches_check(root, args.source)
    if args.patches_command == "refresh":
        return _patches_refresh(root, args.source_git, args.base)
    raise FeedstockError("patches needs a subcommand: check --source ... or refresh --source-git ... --base TAG")


def _print_patches(results) -> None:
    for result in results:
        for line in result.lines():
            print(line)


def _bump(args: argparse.Namespace, root: Path) -> int:
    from .bump import apply_bump, plan_bump

    started = time.perf_counter()
    print(f"bump: reading {args.source} ...", file=sys.stderr)
    try:
        plan = plan_bump(root, args.version, args.source, wheel=args.wheel, sha256=args.sha256,
                         skip_patch_check=args.skip_patch_check, allow_older=args.allow_older)
    except FeedstockError as err:
        results = getattr(err, "patch_results", None)
        if results:
            _print_patches(results)
        raise
    _print_patches(plan.patches)
    for note in plan.notes:
        print(note)
    if args.dry_run:
        sys.stdout.write(plan.diff(Path(root).resolve()))
        print(f"bump --dry-run: {plan.old_version} -> {plan.release.upstream}, sha256 {plan.sha256}; nothing written "
              f"({time.perf_counter() - started:.2f}s)", file=sys.stderr)
        return 0
    rerendered = apply_bump(plan, Path(root).resolve())
    for path in plan.changes:
        print(f"wrote {path.relative_to(Path(root).resolve())}")
    print(f"bump: {plan.old_version} -> {plan.release.upstream}, sha256 {plan.sha256}, build number 0"
          f"{', .ci_support/ rerendered' if rerendered else ''} ({time.perf_counter() - started:.2f}s, "
          f"hashing {plan.hash_seconds:.2f}s)")
    return 0


def _deps(args: argparse.Namespace, root: Path) -> int:
    from .deps_table import DOCS_TABLE_FILE, build_table, format_json, format_markdown, write_docs_table
    from ...layout import load_feedstock
    from .wheel_metadata import read_wheel

    feedstock = load_feedstock(root)
    metadata = read_wheel(args.wheel) if args.wheel else None
    rows = build_table(feedstock, args.source, metadata, args.repodata)
    if args.write_docs:
        changed = write_docs_table(feedstock.root, format_markdown(rows))
        print(f"deps: {DOCS_TABLE_FILE.as_posix()} table {'updated' if changed else 'already current'} "
              f"({len(rows)} rows)")
        return 0
    sys.stdout.write(format_json(rows) if args.format == "json" else format_markdown(rows))
    flagged = [row.package for row in rows if row.flagged]
    if flagged:
        print(f"deps: major.minor differs for {', '.join(flagged)}", file=sys.stderr)
    return 0


def _patches_check(root: Path, source: Path) -> int:
    from ...layout import load_feedstock
    from .patch_series import check_source

    if not Path(source).exists():
        raise FeedstockError(f"source {source} does not exist; pass a PyTorch checkout, unpacked tree or tarball")
    results = check_source(load_feedstock(root), source)
    _print_patches(results)
    failing = [r for r in results if not r.applies]
    print(f"patches check: {len(results) - len(failing)} of {len(results)} apply", file=sys.stderr)
    return 1 if failing else 0


def _patches_refresh(root: Path, source_git: Path, base: str) -> int:
    from ...layout import load_feedstock
    from .patch_series import refresh

    result = refresh(load_feedstock(root), source_git, base)
    for rel in result.written:
        print(f"wrote    recipe/{rel}")
    for rel in result.removed:
        print(f"removed  recipe/{rel} (not on the branch)")
    print(f"patches refresh: {len(result.series)} patches ({len(result.written)} written, "
          f"{len(result.unchanged)} unchanged, {len(result.removed)} removed)")
    return 0
