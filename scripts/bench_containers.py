#!/usr/bin/env python3
"""Benchmark: the test-project config built by build-locally.py in a real podman container
against the same config built natively (--native), both with rattler-build against the local
toolchain channel (--channel), rounds alternating, the best per mode.

Uses the harness of tests/localbuild/test_podman_build.py (tests/support/podman.py): the toolchain
channel for one Python, a private podman configuration, the stand-in build image. Last line:

    containers: container/native X.XX; second image adds N MB of M MB

(the runtime images of `python -m feedstock image` are not built yet: until they are, the
second half says so instead of giving numbers.)

    .venv/bin/python scripts/bench_containers.py [--work DIR] [--keep] [--rounds N]
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

from tests.realbuild.feedstock_build import copy_recipe, prepare_project_source  # noqa: E402
from tests.realbuild.session import machine_ready, machine_variant  # noqa: E402
from tests.support.podman import (CPU, PYTHON, build_stand_in_image, config_texts,  # noqa: E402
                                  podman_feedstock, podman_unavailable, private_podman)
from tests.support.pythons import find_cpythons  # noqa: E402
from tests.support.toolchain import build_toolchain_channel  # noqa: E402


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def timed_build(root: Path, env: dict[str, str], args: list[str]) -> float:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(root / "build-locally.py"), CPU, *args, "--force"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"error: build-locally {' '.join(args[:2])} failed: {proc.stdout[-1500:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--rounds", type=int, default=2, help="builds per mode (default 2)")
    args = parser.parse_args(argv)
    reason = podman_unavailable()
    python = find_cpythons().get(PYTHON)
    if reason or python is None:
        print(f"error: {reason or f'CPython {PYTHON} (pyenv) not found'}", file=sys.stderr)
        return 3
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-containers-"))
    work.mkdir(parents=True, exist_ok=True)
    podman = private_podman(work / "podman")
    try:
        versions = machine_ready()
        step("toolchain channel (not timed)")
        variant = machine_variant(CPU, (PYTHON,), versions, work / "variants" / f"{CPU}.yaml")
        recipe = copy_recipe(work / "recipe", prepare_project_source(work / "source"))
        channel = build_toolchain_channel(work / "toolchain", {PYTHON: python}, recipe, [variant]).channel
        root = podman_feedstock(work / "feedstock", prepare_project_source(work / "project"),
                                config_texts(versions, work))
        step("stand-in build image")
        started = time.monotonic()
        build_stand_in_image(podman, root, CPU, [python])
        print(f"stand-in image: {time.monotonic() - started:.1f} s", flush=True)
        common = ["--tool", "rattler-build", "--channel", str(channel), "--skip-tests",
                  "--jobs", "2", "--min-free-gb", "2"]
        env = dict(podman.env, CPU_COUNT="2", RATTLER_BUILD_PYTHON=sys.executable,
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        modes = {"container": ["--engine", "podman", *common], "native": ["--native", *common]}
        best: dict[str, float] = {}
        for round_ in range(args.rounds):
            for mode in (("container", "native") if round_ % 2 == 0 else ("native", "container")):
                seconds = timed_build(root, env, modes[mode])
                print(f"round {round_ + 1}, {mode}: {seconds:.1f} s", flush=True)
                best[mode] = min(best.get(mode, seconds), seconds)
        ratio = best["container"] / best["native"]
        print(f"best: container {best['container']:.1f} s, native {best['native']:.1f} s")
        print(f"containers: container/native {ratio:.2f}; second image: not measured "
              "(python -m feedstock image is not built yet)")
        return 0
    finally:
        podman.run("system", "reset", "--force", check=False)
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
