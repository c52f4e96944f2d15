#!/usr/bin/env python3
"""Benchmark: a job pool for the heavy target vs MAX_JOBS lowered for everything.

Builds tests/support/megabuild_project with one deliberately heavy target (`flash_attention`,
as in PyTorch) through the driver's real split step, every compile timed by a launcher that
records its start, end and peak RSS (tests/support/compile_timeline.py). Peak memory is the
largest sum of peak RSS over compiles running at one moment.

1. pooled: MAX_JOBS=--jobs, the heavy target in a pool of --pool;
2. flat: no pool (pool = MAX_JOBS), MAX_JOBS lowered from --jobs until the build's peak memory
   fits the pooled build's (or MAX_JOBS is 1).

Prints a table, then

    jobs: peak memory ratio X.XX; wall ratio Y.YY

(pooled / flat: below 1 means the pool is better). Build output goes to <workdir>/bench.log.

    .venv/bin/python benchmarks/bench_jobs.py [--jobs 4] [--pool 1] [--heavy-units 3] [--heavy-weight 40]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_megabuild import output_to  # noqa: E402
from tests.support import compile_timeline, megabuild_harness as harness  # noqa: E402
from tests.support.pythons import find_cpythons  # noqa: E402


def progress(message: str) -> None:
    print(f"bench: {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4, help="MAX_JOBS of the pooled build")
    parser.add_argument("--pool", type=int, default=1, help="heavy compiles at once in the pooled build")
    parser.add_argument("--heavy-units", type=int, default=3, help="translation units of the heavy target")
    parser.add_argument("--heavy-weight", type=int, default=40, help="template depth per heavy unit")
    parser.add_argument("--units", type=int, default=12, help="light core translation units")
    parser.add_argument("--workdir", type=Path, help="keep builds here (default: a temp dir)")
    args = parser.parse_args(argv)
    if min(args.jobs, args.pool, args.heavy_units, args.heavy_weight, args.units) < 1:
        parser.error("--jobs, --pool, --heavy-units, --heavy-weight and --units must be 1 or more")

    cpythons = find_cpythons()
    if not cpythons:
        print("error: no CPython >= 3.10 found", file=sys.stderr)
        return 1
    version, exe = next(iter(cpythons.items()))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "bench.log"
    try:
        harness.check_tools()
        with output_to(log):
            venv = harness.make_venvs({version: exe}, work / "venvs")[version]
    except harness.HarnessUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sizes = {"heavy_units": args.heavy_units, "heavy_weight": args.heavy_weight, "core_units": args.units}
    progress(f"Python {version}; {args.heavy_units} heavy units (weight {args.heavy_weight}), "
             f"{args.units} light core units; work dir {work}, build output in {log}")

    def build(label: str, jobs: int, pool: int) -> compile_timeline.PooledBuild:
        progress(f"{label}: MAX_JOBS={jobs}, heavy pool {pool} ...")
        with output_to(log):
            result = compile_timeline.pooled_build(venv, work / label, max_jobs=jobs, heavy_jobs=pool, **sizes)
        return result

    rows = []
    pooled = build("pooled", args.jobs, args.pool)
    pooled_peak = compile_timeline.peak_memory_kib(pooled.compiles)
    rows.append(("pooled", args.jobs, args.pool, pooled))
    flat = None
    for jobs in range(args.jobs, 0, -1):
        flat = build(f"flat-{jobs}", jobs, jobs)
        rows.append((f"flat-{jobs}", jobs, jobs, flat))
        if compile_timeline.peak_memory_kib(flat.compiles) <= pooled_peak:
            break

    print(f"{'build':<10} {'MAX_JOBS':>8} {'pool':>5} {'heavy at once':>13} {'light at once':>13} "
          f"{'peak MiB':>9} {'wall s':>7}")
    for label, jobs, pool, result in rows:
        print(f"{label:<10} {jobs:>8} {pool:>5} {result.overlap(lambda c: c.heavy):>13} "
              f"{result.overlap(lambda c: not c.heavy):>13} "
              f"{compile_timeline.peak_memory_kib(result.compiles) / 1024:>9.0f} {result.wall_s:>7.1f}")
    flat_peak = compile_timeline.peak_memory_kib(flat.compiles)
    print(f"jobs: peak memory ratio {pooled_peak / flat_peak:.2f}; wall ratio {pooled.wall_s / flat.wall_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
