#!/usr/bin/env python3
"""Benchmark: the test-project config built by build-locally.py in a real Docker container
(a private dockerd, tests/support/docker_daemon.py), in a real podman container and natively
(--native), all with rattler-build against the local toolchain channel (--channel), rounds
alternating (each round starts with the next mode), the best per mode. The container start of
each engine (`run --rm IMAGE true`) is timed on its own: the part of the gap that is the engine.

Uses the harness of tests/localbuild/test_{podman,docker}_build.py: the toolchain channel for one
Python, a private podman configuration, the stand-in build image in both engines. Last line:

    containers: docker/native X.XX; podman/native Y.YY; second image adds N MB of M MB

Then the runtime images (`python -m feedstock image`): the time of one image build with a pip
requirements layer (six), and the bytes a second image with other requirements (idna) adds to
an OCI store (one layout, both images copied in by skopeo: compressed blobs, as a registry holds
them) that already holds the first. By default the images are of the test-project packages just
built (Python 3.12); --image-channel points at real ones (the first channel holds the flavour's
packages; the toolchain channel of the real-build tests supplies python):

    .venv/bin/python benchmarks/bench_containers.py [--work DIR] [--keep] [--rounds N]
    .venv/bin/python benchmarks/bench_containers.py --images-only --image-channel build_artifacts \
        --image-channel TOOLCHAIN_CHANNEL --image-python 3.11
"""
from __future__ import annotations

import argparse
import contextlib
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

from tests.realbuild.feedstock_build import copy_recipe, prepare_project_source  # noqa: E402
from tests.realbuild.session import machine_ready, machine_variant  # noqa: E402
from tests.support.docker_daemon import DockerUnavailable, docker_daemon, docker_unavailable  # noqa: E402
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


def start_seconds(executable: str, env: dict[str, str], image: str, times: int = 5) -> float:
    """The best of `times` container starts (`run --rm IMAGE true`): the engine's own cost."""
    best = float("inf")
    for _ in range(times):
        started = time.monotonic()
        subprocess.run([executable, "run", "--rm", image, "true"], env=env, check=True,
                       capture_output=True, timeout=300)
        best = min(best, time.monotonic() - started)
    return best


def build_ratios(work: Path, podman, docker, python: Path, rounds: int) -> dict[str, float]:
    """The test-project config built in each engine and natively, rounds alternating; each
    engine's best time over the best native time."""
    versions = machine_ready()
    step("toolchain channel (not timed)")
    variant = machine_variant(CPU, (PYTHON,), versions, work / "variants" / f"{CPU}.yaml")
    recipe = copy_recipe(work / "recipe", prepare_project_source(work / "source"))
    channel = build_toolchain_channel(work / "toolchain", {PYTHON: python}, recipe, [variant]).channel
    root = podman_feedstock(work / "feedstock", prepare_project_source(work / "project"),
                            config_texts(versions, work))
    image = yaml_image(root)
    common = ["--tool", "rattler-build", "--channel", str(channel), "--skip-tests",
              "--jobs", "2", "--min-free-gb", "2"]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    modes = {"native": (["--native", *common],
                        dict(podman.env, CPU_COUNT="2", RATTLER_BUILD_PYTHON=sys.executable, PATH=path))}
    engines = {"podman": podman} | ({"docker": docker} if docker is not None else {})
    for name, engine in engines.items():
        step(f"stand-in build image into {name}")
        started = time.monotonic()
        build_stand_in_image(engine, root, CPU, [python], engine_name=name)
        print(f"stand-in image ({name}): {time.monotonic() - started:.1f} s", flush=True)
        print(f"container start ({name}): {start_seconds(name, engine.env, image):.2f} s", flush=True)
        modes[name] = (["--engine", name, *common], dict(engine.env, CPU_COUNT="2"))
    order = list(modes)
    best: dict[str, float] = {}
    for round_ in range(rounds):
        for mode in order[round_ % len(order):] + order[:round_ % len(order)]:
            args, env = modes[mode]
            seconds = timed_build(root, env, args)
            print(f"round {round_ + 1}, {mode}: {seconds:.1f} s", flush=True)
            best[mode] = min(best.get(mode, seconds), seconds)
    print("best: " + ", ".join(f"{mode} {seconds:.1f} s" for mode, seconds in best.items()))
    return {mode: best[mode] / best["native"] for mode in engines}


def yaml_image(root: Path) -> str:
    import yaml

    return yaml.safe_load((root / ".ci_support" / f"{CPU}.yaml").read_text())["docker_image"][0]


def image_part(work: Path, env: dict[str, str], channels: list[Path], python: str,
               host_python: Path) -> tuple[float, float, float]:
    """(seconds of the first image build, MB the second adds to the store, MB of the store)."""
    wheels = work / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "-d", str(wheels), "six==1.17.0", "idna==3.10"], check=True, timeout=600)
    store = work / "store"
    sizes, seconds = [], []
    for name, requirement in (("first", "six==1.17.0"), ("second", "idna==3.10")):
        req = work / f"requirements-{name}.txt"
        req.write_text(f"{requirement}\n")
        out = work / f"image-{name}"
        shutil.rmtree(out, ignore_errors=True)
        command = [sys.executable, "-m", "feedstock", "image", *[a for c in channels for a in ("--channel", str(c))],
                   "--flavour", "cpu", "--python", python, "--requirements", str(req), "--find-links", str(wheels),
                   "--host-python", str(host_python), "--output", str(out)]
        started = time.monotonic()
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
        seconds.append(time.monotonic() - started)
        if proc.returncode != 0:
            raise SystemExit(f"error: feedstock image failed: {proc.stderr[-1500:]}")
        print(f"image {name}: {seconds[-1]:.1f} s", flush=True)
        ref = json.loads((out / "image.json").read_text())["oci_ref"]
        subprocess.run(["skopeo", "copy", "--quiet", f"oci:{out / 'oci'}:{ref}", f"oci:{store}:{name}"],
                       check=True, timeout=1800)
        sizes.append(sum(f.stat().st_size for f in (store / "blobs").rglob("*") if f.is_file()))
    return seconds[0], (sizes[1] - sizes[0]) / 1e6, sizes[1] / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--rounds", type=int, default=2, help="builds per mode (default 2)")
    parser.add_argument("--images-only", action="store_true",
                        help="skip the container/native builds (needs --image-channel)")
    parser.add_argument("--image-channel", action="append", type=Path, default=[], metavar="DIR",
                        help="build the images from these channels instead of the test project's")
    parser.add_argument("--image-python", default=PYTHON, help=f"the images' Python (default {PYTHON})")
    args = parser.parse_args(argv)
    if args.images_only and not args.image_channel:
        parser.error("--images-only needs --image-channel")
    reason = podman_unavailable()
    pythons = find_cpythons()
    python, image_python = pythons.get(PYTHON), pythons.get(args.image_python)
    if reason or python is None or image_python is None:
        print(f"error: {reason or f'CPython {PYTHON} and {args.image_python} (pyenv) needed'}", file=sys.stderr)
        return 3
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-containers-"))
    work.mkdir(parents=True, exist_ok=True)
    podman = private_podman(work / "podman")
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(podman.run, "system", "reset", "--force", check=False)
            docker, why_no_docker = None, docker_unavailable()
            if not why_no_docker and not args.images_only:
                try:
                    docker = stack.enter_context(docker_daemon(work / "docker"))
                except DockerUnavailable as err:
                    why_no_docker = str(err)
            ratios = {} if args.images_only else build_ratios(work, podman, docker, python, args.rounds)
            step("runtime images")
            channels = args.image_channel or [work / "feedstock" / "build_artifacts", work / "toolchain" / "channel"]
            seconds, added, total = image_part(work, podman.env, channels, args.image_python, image_python)
        print(f"image build: {seconds:.1f} s")
        # the second image's own layer is kB: whole MB would print 0
        added_text = f"{added:.2f}" if added < 10 else f"{added:.0f}"
        docker_text = (f"{ratios['docker']:.2f}" if "docker" in ratios
                       else f"not measured ({why_no_docker or 'skipped'})")
        podman_text = f"{ratios['podman']:.2f}" if "podman" in ratios else "not measured"
        print(f"containers: docker/native {docker_text}; podman/native {podman_text}; "
              f"second image adds {added_text} MB of {total:.0f} MB")
        return 0
    finally:  # after the engines have stopped and unmounted what they had under work
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
