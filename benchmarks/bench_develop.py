#!/usr/bin/env python3
"""Benchmark: `build-locally.py CONFIG --native --develop PATH` on the PyTorch-shaped test project.

A feedstock copy with the cpu/generic job (this machine's compilers and one Python, 3.12), the
local toolchain channel the suite builds (once per machine, ~/.cache/pytorch-feedstock), and a
checkout of the test project's scikit-build-core form. Three runs of the same command:

1. the first build: the develop environment solved and installed, every object compiled;
2. the same command after an edit of one C++ file of the core library (aten/Ops.cpp);
3. (the edit shows in the installed torch: checked, not timed).

The test project's core library is made heavier than the suite's (MEGATEST_CORE_UNITS generated
translation units, --units), so that a first build weighs more than the fixed cost of a run
(CMake's configure, pip's install); real PyTorch weighs thousands of times more. Last line:

    develop: first build X s; one-file edit recompiles K of M objects in Y s (ratio R)

(R = Y / X; the goal is K = 1 and R <= 0.10.)

    .venv/bin/python benchmarks/bench_develop.py [--units N] [--work DIR] [--keep]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.develop_checkout import develop_checkout, edit_core_file, recompiled_counts  # noqa: E402
from tests.support.podman import CPU, PYTHON, config_texts, podman_feedstock  # noqa: E402

PYTHONS = ("3.11", "3.12")   # the toolchain channel the suite builds (tests/conftest.py)


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def toolchain(work: Path) -> tuple[Path, dict[str, str]]:
    """The suite's toolchain channel (built once per machine) and this machine's tool versions."""
    from tests.realbuild.feedstock_build import copy_recipe, prepare_project_source
    from tests.realbuild.session import machine_ready, machine_variant
    from tests.support.machine_cache import cached_build, toolchain_key
    from tests.support.pythons import find_cpythons
    from tests.support.toolchain import build_toolchain_channel

    found = find_cpythons()
    missing = [v for v in PYTHONS if v not in found]
    if missing:
        raise SystemExit(f"error: the toolchain channel needs CPython {', '.join(missing)} (pyenv)")
    pythons = {v: found[v] for v in PYTHONS}
    versions = machine_ready()
    recipe = copy_recipe(work / "recipe", prepare_project_source(work / "source", "scikit-build-core"))
    variant = machine_variant(CPU, PYTHONS, versions, work / "variants" / f"{CPU}.yaml")
    channel = cached_build("toolchain", toolchain_key(versions, pythons),
                           lambda entry: build_toolchain_channel(entry, pythons, recipe, [variant]))
    return channel.channel, versions


def develop(root: Path, checkout: Path, channel: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(root / "build-locally.py"), CPU, "--native", "--develop",
                           str(checkout), "--channel", str(channel), "--min-free-gb", "2"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - started
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise SystemExit(f"error: the develop run failed (exit {proc.returncode}):\n{out[-3000:]}")
    return seconds, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=60,
                        help="generated core-library translation units (default 60; the suite uses 4)")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    if args.units < 1:
        parser.error("--units must be at least 1")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-develop-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        step("toolchain channel (built once per machine)")
        channel, versions = toolchain(work)
        root = podman_feedstock(work / "feedstock", work / "source", {CPU: config_texts(versions, work)[CPU]})
        checkout = develop_checkout(work / "checkout")
        env = dict(os.environ, RATTLER_BUILD_PYTHON=sys.executable, CPU_COUNT=str(os.cpu_count() or 1),
                   MEGATEST_CORE_UNITS=str(args.units))
        step(f"first build ({args.units} core units, Python {PYTHON})")
        first, out = develop(root, checkout, channel, env)
        _, total = recompiled_counts(out)
        step(f"first build: {first:.1f} s, {total} objects")
        edit_core_file(checkout)
        step("the same command after an edit of aten/Ops.cpp")
        again, out = develop(root, checkout, channel, env)
        count, total = recompiled_counts(out)
        python = root / "build_artifacts" / "develop" / f"{CPU}-{PYTHON}" / "env" / "bin" / "python"
        shown = subprocess.run([str(python), "-c", "import torch; print(torch._C.self_test())"], cwd="/",
                               capture_output=True, text=True, timeout=120)
        if shown.returncode != 0:
            raise SystemExit(f"error: the installed torch does not import: {shown.stderr[-500:]}")
        step(f"installed torch: self_test() = {shown.stdout.strip()} (the edit adds 1000)")
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"develop: first build {first:.1f} s; one-file edit recompiles {count} of {total} objects "
          f"in {again:.1f} s (ratio {again / first:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
