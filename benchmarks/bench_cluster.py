#!/usr/bin/env python3
"""Benchmark: a batch as a Slurm job array with one shared compile cache, against each config
built alone without one.

The test project's configs (tests/support/megabuild_project through the feedstock's recipe.yaml,
rattler-build, one Python each, the local toolchain channel) in sibling pairs: the cpu/generic
job for Python 3.12 and 3.11 (the same C++ core, another extension) and, with --cuda where nvcc
is installed, the same pair of this machine's CUDA job. (A BLAS pair is not measured: the
cpu/mkl job does not resolve against the toolchain's stand-ins yet.)

- alone: `build-locally.py CONFIG --native` for each config in its own feedstock copy, with a
  fresh, empty ccache folder each (so ccache, the compiler launcher, counts the compiles: every
  one is a miss);
- cluster: `build-locally.py --scheduler slurm --wait` on a real one-node Slurm
  (tests/support/slurm_cluster.py), every task with --cpus-per-task 2 and one shared cache folder.
  The node has 2 cores, so the tasks run one after another, siblings after siblings.

Compile work = compiles ccache (the compiler launcher) ran the compiler for: its misses, from
`ccache --print-stats` of each cache folder. Last line:

    cluster: N configs; compile work ratio X.XX; wall ratio Y.YY

(ratios: cluster / alone; lower is better.)

    .venv/bin/python benchmarks/bench_cluster.py [--work DIR] [--keep] [--cuda]
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

from tests.realbuild.feedstock_build import prepare_project_source  # noqa: E402
from tests.support.cluster_build import OTHER_PYTHON, ccache_counts, one_python_config  # noqa: E402
from tests.support.paths import CPU_GENERIC_JOB  # noqa: E402
from tests.support.podman import PYTHON, podman_feedstock  # noqa: E402
from tests.support.pythons import find_cpythons  # noqa: E402
from tests.support.slurm_cluster import slurm_cluster, slurm_unavailable  # noqa: E402

def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def configs_to_build(versions: dict[str, str], work: Path, cuda: bool) -> dict[str, str]:
    jobs = {"cpu": CPU_GENERIC_JOB}
    if cuda:
        from tests.realbuild.cuda import cuda_job, nvcc_major_minor

        jobs["cuda"] = cuda_job(nvcc_major_minor(versions), "generic")
    configs = {}
    for short, job in jobs.items():
        for python in (PYTHON, OTHER_PYTHON):
            name = f"linux_64_{len(configs)}_{short}_py{python.replace('.', '')}"
            configs[name] = one_python_config(job, versions, work / "variants", python)
    return configs


def build_args(configs: list[str], channel: Path, cache: Path) -> list[str]:
    return [*configs, "--tool", "rattler-build", "--skip-tests", "--min-free-gb", "1",
            "--jobs", "2", "--channel", str(channel), "--compile-cache", str(cache), "--force"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--cuda", action="store_true",
                        help="also the CUDA pair (needs nvcc; its compiles take minutes)")
    args = parser.parse_args(argv)

    reason = slurm_unavailable()
    pythons = find_cpythons()
    missing = [v for v in (PYTHON, OTHER_PYTHON) if v not in pythons]
    if reason or missing:
        print(f"error: {reason or f'CPython {missing[0]} not found (pyenv)'}", file=sys.stderr)
        return 3
    from tests.realbuild.session import machine_ready
    from tests.support.toolchain import build_toolchain_channel

    versions = machine_ready()
    cuda = args.cuda and "nvcc" in versions
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        configs = configs_to_build(versions, work, cuda)
        names = list(configs)
        source = prepare_project_source(work / "source")
        alone_root = podman_feedstock(work / "alone", source, configs)
        cluster_root = podman_feedstock(work / "cluster", source, configs)
        step(f"toolchain channel for {len(names)} configs")
        toolchain = build_toolchain_channel(
            work / "toolchain", {v: pythons[v] for v in (PYTHON, OTHER_PYTHON)},
            alone_root / "recipe" / "recipe.yaml",
            [alone_root / ".ci_support" / f"{name}.yaml" for name in names], log=lambda _: None)
        env = dict(os.environ, RATTLER_BUILD_PYTHON=sys.executable, CPU_COUNT="2")

        alone_seconds, alone_work = 0.0, 0
        for name in names:
            step(f"alone: {name}")
            started = time.monotonic()
            proc = subprocess.run([sys.executable, str(alone_root / "build-locally.py"), "--native",
                                   *build_args([name], toolchain.channel, work / "caches" / name)],
                                  cwd=alone_root, env=env, capture_output=True, text=True)
            seconds = time.monotonic() - started
            if proc.returncode != 0:
                print(proc.stdout[-3000:], proc.stderr[-2000:], file=sys.stderr)
                return 1
            compiles, _ = ccache_counts(work / "caches" / name)
            print(f"  {name}: {seconds:.1f} s, {compiles} compiles", flush=True)
            alone_seconds += seconds
            alone_work += compiles

        step("cluster: one array, one shared cache")
        with slurm_cluster(work / "slurm") as cluster:
            cenv = dict(env, SLURM_CONF=str(cluster.conf))
            started = time.monotonic()
            proc = subprocess.run([sys.executable, str(cluster_root / "build-locally.py"),
                                   "--scheduler", "slurm", "--wait", "--cpus-per-task", "2",
                                   "--partition", cluster.partition,
                                   *build_args(names, toolchain.channel, work / "shared-cache")],
                                  cwd=cluster_root, env=cenv, capture_output=True, text=True)
            cluster_seconds = time.monotonic() - started
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-2000:], file=sys.stderr)
            return 1
        cluster_work, hits = ccache_counts(work / "shared-cache")
        print(f"  shared cache: {cluster_work} compiles, {hits} served from the cache", flush=True)
        print(f"alone: {alone_seconds:.1f} s, {alone_work} compiles; cluster: "
              f"{cluster_seconds:.1f} s, {cluster_work} compiles", flush=True)
        print(f"cluster: {len(names)} configs; compile work ratio {cluster_work / max(alone_work, 1):.2f}; "
              f"wall ratio {cluster_seconds / alone_seconds:.2f}")
        return 0
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
