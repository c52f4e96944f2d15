#!/usr/bin/env python3
"""Benchmark: overhead of `build-locally.py --dry-run --all` (target: well under a second).

Runs the real script with `python3 -S` (standard library only, so no renderer) on
  * a throwaway feedstock with --configs synthetic configs in conda-smithy's format, and
  * the repository's own .ci_support/ when it has configs,
and prints the median wall time of --repeat runs next to the bare interpreter start-up.
--with-renderer also times the repository run with this Python (site-packages on), where
the dry run renders each config's outputs through feedstock.before_build.render.

    python3 benchmarks/bench_dry_run.py [--configs 24] [--repeat 7] [--with-renderer]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def synthetic_config(index: int) -> str:
    cuda = ["None", "'12.9'", "'13.0'"][index % 3]
    blas = ["mkl", "generic"][index // 3 % 2]
    lines = [f"blas_impl:\n- {blas}", "c_compiler:\n- gcc", "c_compiler_version:\n- '14'",
             "channel_sources:\n- conda-forge", "channel_targets:\n- conda-forge main",
             f"cuda_compiler_version:\n- {cuda}", "cxx_compiler_version:\n- '14'",
             "docker_image:\n- quay.io/condaforge/linux-anvil-x86_64:alma9",
             "megabuild:\n- 'true'",
             "pin_run_as_build:\n  python:\n    min_pin: x.x\n    max_pin: x.x",
             "python:\n" + "\n".join(f"- 3.{m}.* *_cpython" for m in range(10, 15)),
             "target_platform:\n- linux-64",
             "zip_keys:\n- - c_compiler_version\n  - cxx_compiler_version\n  - cuda_compiler_version"]
    lines += [f"pin_{n}:\n- '{n}.{index}'" for n in range(40)]  # real configs carry ~40 pins
    return "\n".join(lines) + "\n"


def make_tree(target: Path, count: int) -> Path:
    root = target / "feedstock"
    root.mkdir()
    shutil.copy2(ROOT / "build-locally.py", root)
    for package in ("localbuild", "common"):
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "recipe").mkdir()
    ci = root / ".ci_support"
    ci.mkdir()
    for index in range(count):
        (ci / f"linux_64_variant{index:03d}.yaml").write_text(synthetic_config(index))
    return root


def median_seconds(command: list[str], cwd: Path, repeat: int) -> float:
    """Median wall time; bytecode caching allowed (as on a user's machine) after a warm-up run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times = []
    for attempt in range(repeat + 1):
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"bench: {' '.join(command)} failed: {proc.stderr.strip()}")
        if attempt > 0:
            times.append(elapsed)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--with-renderer", action="store_true")
    args = parser.parse_args()
    if args.configs < 1 or args.repeat < 1:
        parser.error("--configs and --repeat must be 1 or more")
    python = sys.executable
    startup = median_seconds([python, "-S", "-c", "pass"], ROOT, args.repeat)
    print(f"python -S start-up:                         {startup * 1000:7.1f} ms")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tree = make_tree(Path(tmp), args.configs)
        command = [python, "-S", str(tree / "build-locally.py"), "--dry-run", "--all"]
        seconds = median_seconds(command, tree, args.repeat)
        results.append(seconds)
        print(f"--dry-run --all, {args.configs} synthetic configs:     {seconds * 1000:7.1f} ms "
              f"({(seconds - startup) * 1000:.1f} ms above start-up)")
        shutil.rmtree(tree / "localbuild" / "__pycache__", ignore_errors=True)
        cold = median_seconds(command[:1] + ["-B"] + command[1:], tree, args.repeat)
        results.append(cold)
        print(f"  same without .pyc files (python -B):       {cold * 1000:7.1f} ms")
    real = sorted((ROOT / ".ci_support").glob("*.yaml"))
    if real:
        seconds = median_seconds([python, "-S", str(ROOT / "build-locally.py"), "--dry-run", "--all"],
                                 ROOT, args.repeat)
        results.append(seconds)
        print(f"--dry-run --all, repository ({len(real)} configs):  {seconds * 1000:7.1f} ms")
        if args.with_renderer:
            rendered = median_seconds([python, str(ROOT / "build-locally.py"), "--dry-run", "--all"],
                                      ROOT, max(1, args.repeat // 3))
            print(f"  same with the renderer (outputs rendered): {rendered * 1000:7.1f} ms")
    else:
        print("repository .ci_support/ has no configs yet: only the synthetic tree was timed")
    worst = max(results)
    verdict = "OK" if worst < 0.5 else "SLOW"
    print(f"summary: dry-run overhead {worst * 1000:.0f} ms (worst case, stdlib only; "
          f"target well under 1 s): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
