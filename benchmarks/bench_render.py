#!/usr/bin/env python3
"""Benchmark: how long rendering every .ci_support config takes (target: whole matrix < 2 s).

Also times the full variant expansion (rerender --check's work). Run from anywhere:
    .venv/bin/python benchmarks/bench_render.py [--repeat N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from feedstock.before_build.ci.rerender import check  # noqa: E402
from feedstock.before_build.render.outputs import render_ci_config  # noqa: E402

TARGET_SECONDS = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (default 3; the best counts)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    configs = sorted(p.stem for p in (ROOT / ".ci_support").glob("*.yaml"))
    if not configs:
        print("error: .ci_support/ has no configs; run: python -m feedstock rerender", file=sys.stderr)
        return 2
    rounds = []
    per_config: dict[str, float] = {}
    outputs = 0
    for round_ in range(1, args.repeat + 1):
        start = time.perf_counter()
        outputs = 0
        for name in configs:
            t0 = time.perf_counter()
            outputs += len(render_ci_config(ROOT, name))
            per_config[name] = min(per_config.get(name, 1e9), time.perf_counter() - t0)
        rounds.append(time.perf_counter() - start)
        print(f"round {round_}/{args.repeat}: rendered {len(configs)} configs ({outputs} outputs) "
              f"in {rounds[-1]:.3f} s", flush=True)
    slowest = max(per_config, key=per_config.get)
    t0 = time.perf_counter()
    check(ROOT)
    expand = time.perf_counter() - t0
    best = min(rounds)
    print(f"per config: median {statistics.median(per_config.values()) * 1000:.1f} ms, "
          f"slowest {slowest} {per_config[slowest] * 1000:.1f} ms")
    print(f"variant expansion of all platforms (rerender --check): {expand:.3f} s")
    verdict = "OK" if best < TARGET_SECONDS else "SLOWER THAN TARGET"
    print(f"summary: render of the whole matrix ({len(configs)} configs, {outputs} outputs) "
          f"first (cold) round {rounds[0]:.3f} s, best {best:.3f} s of {args.repeat}, target < {TARGET_SECONDS:.0f} s: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
