#!/usr/bin/env python3
"""Benchmark: `build-locally.py --dry-run --all` (target: under 1 s for all configs on 2 cores).

Times, as medians of --repeat runs next to the bare interpreter start-up:
  * the repository's dry run, which renders every plan's config through `python -m feedstock
    render` under this Python (run this script with .venv/bin/python: PyYAML, Jinja2), and what
    those renders cost alone: one `render CONFIG --json` process per config one after another
    (how the dry run rendered before the batch), and all of them in one `render --batch`;
  * build-locally's own overhead, standard library only (`python3 -S`, no renderer beside it):
    a throwaway feedstock with --configs synthetic configs in conda-smithy's format.

    .venv/bin/python benchmarks/bench_dry_run.py [--configs 24] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 1.0


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
    """build-locally and its ground floor, the driver's package it reads the arch tables from, a
    stub recipe; no feedstock tools, so nothing renders."""
    root = target / "feedstock"
    root.mkdir()
    shutil.copy2(ROOT / "build-locally.py", root)
    for package in ("localbuild", "common", "recipe/megabuild"):
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "recipe" / "meta.yaml").write_text("package:\n  name: libtorch-split\n")
    ci = root / ".ci_support"
    ci.mkdir()
    for index in range(count):
        (ci / f"linux_64_variant{index:03d}.yaml").write_text(synthetic_config(index))
    return root


def run_env() -> dict[str, str]:
    # bytecode caching allowed (as on a user's machine); no shell's dev tag
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "FEEDSTOCK_DEV_TAG")}


def median_seconds(command: list[str], cwd: Path, repeat: int, stdin: str | None = None) -> tuple[float, str]:
    """Median wall time after a warm-up run, and the last run's stdout."""
    times, stdout = [], ""
    for attempt in range(repeat + 1):
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=cwd, input=stdin, env=run_env(), capture_output=True, text=True,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"bench: {' '.join(command)} failed: {proc.stderr.strip()[-500:]}")
        if attempt > 0:
            times.append(elapsed)
        stdout = proc.stdout
    return statistics.median(times), stdout


def rendered_configs(stdout: str) -> list[str]:
    """The configs whose outputs the dry run printed (rendered, not 'not rendered here')."""
    names, current = [], None
    for line in stdout.splitlines():
        header = re.match(r"== \[\d+/\d+\] (\S+): ", line)
        if header:
            current = header.group(1)
        elif re.fullmatch(r"outputs:      \d+", line) and current:
            names.append(current)
    return names


def time_renders(python: str, configs: list[str], repeat: int) -> None:
    """The renders alone: one process per config (the dry run's way before the batch), then one
    `render --batch` for all of them (where the tools have it)."""
    feedstock = [python, "-m", "feedstock", "--feedstock-root", str(ROOT), "render"]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for name in configs:
            subprocess.run([*feedstock, name, "--json"], cwd=ROOT, env=run_env(), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    print(f"  render CONFIG --json, one process each:   {statistics.median(times) * 1000:7.1f} ms")
    helptext = subprocess.run([*feedstock, "--help"], cwd=ROOT, env=run_env(), capture_output=True, text=True).stdout
    if "--batch" in helptext:
        batch = json.dumps([{"config": name} for name in configs])
        seconds, _ = median_seconds([*feedstock, "--batch", "-"], ROOT, repeat, stdin=batch)
        print(f"  render --batch, all in one process:       {seconds * 1000:7.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=24, help="synthetic configs (default 24)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each command (default 5)")
    args = parser.parse_args()
    if args.configs < 1 or args.repeat < 1:
        parser.error("--configs and --repeat must be 1 or more")
    python = sys.executable
    startup, _ = median_seconds([python, "-S", "-c", "pass"], ROOT, args.repeat)
    print(f"python -S start-up:                           {startup * 1000:7.1f} ms")
    verdict, headline = "", ""
    if sorted((ROOT / ".ci_support").glob("*.yaml")):
        command = [python, "-S", str(ROOT / "build-locally.py"), "--dry-run", "--all", "--min-free-gb", "0"]
        seconds, stdout = median_seconds(command, ROOT, args.repeat)
        configs = rendered_configs(stdout)
        print(f"--dry-run --all, repository, {len(configs)} configs rendered: {seconds * 1000:7.1f} ms")
        if configs:
            time_renders(python, configs, args.repeat)
            verdict = "OK" if seconds < TARGET_S else "SLOW"
            headline = f"--dry-run --all renders {len(configs)} configs in {seconds * 1000:.0f} ms"
        else:
            print("  (no config rendered: run this with .venv/bin/python, which has PyYAML and Jinja2)")
    else:
        print("repository .ci_support/ has no configs yet: only the synthetic tree was timed")
    with tempfile.TemporaryDirectory() as tmp:
        tree = make_tree(Path(tmp), args.configs)
        command = [python, "-S", str(tree / "build-locally.py"), "--dry-run", "--all", "--min-free-gb", "0"]
        own, _ = median_seconds(command, tree, args.repeat)
        print(f"--dry-run --all, {args.configs} synthetic configs, no renderer: {own * 1000:7.1f} ms "
              f"({(own - startup) * 1000:.1f} ms above start-up)")
        shutil.rmtree(tree / "localbuild" / "__pycache__", ignore_errors=True)
        cold, _ = median_seconds(command[:1] + ["-B"] + command[1:], tree, args.repeat)
        print(f"  same without .pyc files (python -B):       {cold * 1000:7.1f} ms")
    if not headline:
        verdict = "OK" if max(own, cold) < TARGET_S else "SLOW"
        headline = f"--dry-run --all without the renderer {max(own, cold) * 1000:.0f} ms"
    print(f"summary: {headline} (target under {TARGET_S:.0f} s on 2 cores; build-locally's own part "
          f"{own * 1000:.0f} ms): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
