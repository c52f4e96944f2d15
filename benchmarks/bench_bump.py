#!/usr/bin/env python3
"""Benchmark: how long ``python -m feedstock bump`` takes on a release-sized tarball, hashing excluded.

Packs a pytorch-v9.9.9/ tarball from the real torch 2.13.0 wheel's files (the bulk) plus the
files the recipe's patches touch, bumps a temporary copy of this feedstock to 9.9.9 with the patch
check on, and prints each phase: sha256, the one pass over the tarball, the patch check, the line
edits and the write (with the .ci_support check). Run from anywhere:
    .venv/bin/python benchmarks/bench_bump.py [--wheel torch-2.13.0-...whl] [--repeat N]
"""
from __future__ import annotations

import argparse
import io
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from feedstock.before_build.maintain.bump import apply_bump, plan_bump  # noqa: E402
from feedstock.layout import load_feedstock  # noqa: E402
from feedstock.before_build.maintain.patch_series import check_series, patch_paths, wanted_by_patches  # noqa: E402
from feedstock.before_build.maintain.source_tree import load_source  # noqa: E402
from tests.support.megabuild_harness import HarnessUnavailable, download_torch_wheel  # noqa: E402
from tests.support.feedstock_copy import copy_feedstock  # noqa: E402
from tests.support.pytorch_source import source_files  # noqa: E402  (the test's source files: patches apply to them)

VERSION = "9.9.9"


def find_wheel(scratch: Path) -> Path:
    try:
        return download_torch_wheel(scratch)
    except HarnessUnavailable as err:
        raise SystemExit(f"error: {err}; pass --wheel torch-2.13.0-...whl")


def pack_release(wheel: Path, dest: Path) -> tuple[int, int]:
    """pytorch-v9.9.9.tar.gz: the wheel's files, then the source files the patches need. (files, bytes)"""
    top = f"pytorch-v{VERSION}"
    extra = source_files(wheel, VERSION, "3.7.1")
    count = 0
    with zipfile.ZipFile(wheel) as archive, tarfile.open(dest, "w:gz", compresslevel=6) as out:
        for info in archive.infolist():
            if info.is_dir() or info.filename in extra:
                continue
            member = tarfile.TarInfo(f"{top}/{info.filename}")
            member.size = info.file_size
            with archive.open(info) as handle:
                out.addfile(member, handle)
            count += 1
        for rel, text in extra.items():
            data = text.encode()
            member = tarfile.TarInfo(f"{top}/{rel}")
            member.size = len(data)
            out.addfile(member, io.BytesIO(data))
            count += 1
    return count, dest.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, help="the torch 2.13.0 wheel (default: pip download, offline cache)")
    parser.add_argument("--repeat", type=int, default=3, help="timed bumps (default 3; the best counts)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    with tempfile.TemporaryDirectory(prefix="bench-bump-") as tmp:
        scratch = Path(tmp)
        wheel = args.wheel or find_wheel(scratch)
        tarball = scratch / f"pytorch-v{VERSION}.tar.gz"
        started = time.perf_counter()
        files, size = pack_release(wheel, tarball)
        print(f"release tarball: {files} files, {size / 1e6:.0f} MB (packed in {time.perf_counter() - started:.1f}s)")
        rounds = []
        for round_ in range(1, args.repeat + 1):
            root = copy_feedstock(scratch / f"feedstock-{round_}")
            feedstock = load_feedstock(root)
            paths = patch_paths(feedstock)
            wanted = wanted_by_patches(feedstock, paths)
            t0 = time.perf_counter()
            tree = load_source(tarball, lambda rel: rel in wanted)
            t1 = time.perf_counter()
            results = check_series(feedstock, tree, paths)
            t2 = time.perf_counter()
            assert all(r.applies for r in results), [r.lines() for r in results]
            plan = plan_bump(root, VERSION, str(tarball))
            t3 = time.perf_counter()
            rerendered = apply_bump(plan, root)
            t4 = time.perf_counter()
            bump_seconds = (t3 - t2) - plan.hash_seconds + (t4 - t3)
            rounds.append(bump_seconds)
            print(f"round {round_}: bump {bump_seconds:.2f}s without hashing (hashing {plan.hash_seconds:.2f}s; "
                  f"of which: one tarball pass {t1 - t0:.2f}s, patch check {t2 - t1:.3f}s, write + .ci_support "
                  f"check {t4 - t3:.2f}s{', rerendered' if rerendered else ''}); "
                  f"{len(plan.changes)} file(s) changed")
        best = min(rounds)
        print(f"summary: bump of a {size / 1e6:.0f} MB / {files}-file release tarball takes {best:.2f}s "
              f"(best of {len(rounds)}), hashing excluded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
