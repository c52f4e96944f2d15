#!/usr/bin/env python3
"""Benchmark: megabuild (split + one pytorch step per Python) vs N independent clean builds.

Builds tests/support/megabuild_project for real with every CPython found (or --pythons N of them):
once the megabuild way through the driver's steps, once per Python the naive way (fresh copy,
`pip install .`). Counts compiled objects with a compiler launcher. Prints a table and

    megabuild: N pythons, core objects compiled 1x, wall ratio X.XX vs naive

Target: core objects compiled exactly once, ratio <= 0.45 for four Pythons. The core library is
made big enough (--units x --weight template instantiations) that compiling it dominates, as
it does in PyTorch. Build output goes to <workdir>/bench.log.

`--backend rocm` builds the ROCm variant: PyTorch's real hipify (from the torch 2.13.0 wheel)
converts the CUDA sources, the real hipcc compiles the kernel for gfx90a and gfx1030 into
torch_hip; every naive build hipifies and compiles the kernel again. It also prints how often
hipify and hipcc ran. Needs hipcc (Debian: hipcc libamdhip64-dev rocm-device-libs).

`--frontend scikit-build-core` builds the project's PyTorch 2.14+ form (pyproject.toml with the
scikit-build-core backend, no setup.py) with the real scikit-build-core, one install per Python
as in conda host environments, both the megabuild and the naive builds. Its last line is

    megabuild: scikit-build-core, N Pythons, CMake V; wall ratio X.XX; python switch recompiles K of M objects

where K is the most objects any pytorch step after the split compiled and M all objects the
split compiled (the Python-dependent ones are torch_python's and _C's). Goal: ratio <= 0.45 and
K equal to the Python-dependent objects.

CMake and Ninja are PyPI's releases (tests/support/build_tools.py, cached per machine): the
newest tested CMake of recipe/megabuild/tool_versions.py, or `--cmake VERSION` (any PyPI
release in the recipe's range, e.g. the floor 3.27.9). The last line names the CMake.

    .venv/bin/python benchmarks/bench_megabuild.py [--pythons 4] [--units 12] [--weight 16]
    .venv/bin/python benchmarks/bench_megabuild.py --backend rocm --pythons 3
    .venv/bin/python benchmarks/bench_megabuild.py --frontend scikit-build-core [--cmake 3.27.9]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import megabuild_harness as harness  # noqa: E402
from tests.support.build_tools import NEWEST_CMAKE  # noqa: E402
from tests.support.pythons import find_cpythons  # noqa: E402
from megabuild.tool_versions import CMAKE_SPEC, in_range, parse_release  # noqa: E402


@contextlib.contextmanager
def output_to(log: Path):
    """Send this process's (and its children's) stdout/stderr to log while building."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "ab") as handle:
        os.dup2(handle.fileno(), 1)
        os.dup2(handle.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def children_cpu() -> float:
    """CPU seconds used by finished child processes (compilers, cmake, pip) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def progress(message: str) -> None:
    print(f"bench: {message}", flush=True)


def split_counts(objects: list[str]) -> tuple[int, int]:
    core = sum(1 for o in objects if harness.target_of(o) in harness.CORE_TARGETS)
    python = sum(1 for o in objects if harness.target_of(o) in harness.PYTHON_TARGETS)
    return core, python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pythons", type=int, default=0, help="use the first N CPythons (0: all)")
    parser.add_argument("--units", type=int, default=12, help="generated core translation units")
    parser.add_argument("--weight", type=int, default=16, help="template depth per core unit")
    parser.add_argument("--workdir", type=Path, help="keep builds here (default: a temp dir)")
    parser.add_argument("--backend", choices=("cpu", "cuda", "rocm"), default="cpu",
                        help="variant to build (default: cpu)")
    parser.add_argument("--frontend", choices=harness.FRONTENDS, default="setup.py",
                        help="the project's build: PyTorch's setup.py shape (up to 2.13, the "
                             "default) or its scikit-build-core shape (2.14 and later)")
    parser.add_argument("--cmake", default=NEWEST_CMAKE, metavar="VERSION",
                        help=f"PyPI's CMake release to build with (default: {NEWEST_CMAKE}, the "
                             f"newest tested; the recipe accepts {CMAKE_SPEC})")
    parser.add_argument("--torch-wheel", type=Path,
                        help="torch 2.13.0 wheel whose hipify the ROCm build uses (default: "
                             "$TORCH_WHEEL, else pip download from the offline cache)")
    args = parser.parse_args(argv)
    if args.pythons < 0 or args.units < 1 or args.weight < 1:
        parser.error("--pythons must be 0 or more, --units and --weight 1 or more")
    if not in_range(parse_release(args.cmake)):
        parser.error(f"--cmake {args.cmake} is outside the recipe's range ({CMAKE_SPEC}); the "
                     "driver would refuse it")

    cpythons = find_cpythons()
    if args.pythons:
        cpythons = dict(list(cpythons.items())[: args.pythons])
    if len(cpythons) < 2:
        print(f"error: need at least two CPythons >= 3.10, found {sorted(cpythons)}",
              file=sys.stderr)
        return 1
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-megabuild-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "bench.log"
    progress(f"{len(cpythons)} pythons ({', '.join(cpythons)}), {args.units} core units of "
             f"weight {args.weight}; work dir {work}, build output in {log}")
    wheel = args.torch_wheel or (Path(os.environ["TORCH_WHEEL"]) if os.environ.get("TORCH_WHEEL")
                                 else None)
    try:
        harness.check_tools(args.cmake)
        if args.backend == "rocm":
            harness.check_rocm_tools()
            wheel = wheel or harness.download_torch_wheel(work / "wheel")
        with output_to(log):
            venvs = harness.make_venvs(cpythons, work / "venvs")
    except harness.HarnessUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    builds = {"backend": args.backend, "torch_wheel": wheel, "frontend": args.frontend,
              "cmake": args.cmake}

    rows: list[tuple[str, str, float, int, int]] = []
    progress(f"megabuild ({args.backend}): split + libtorch + one pytorch step per Python ...")
    start, cpu_start = time.monotonic(), children_cpu()
    with output_to(log):
        mega = harness.run_megabuild(venvs, work / "megabuild", core_units=args.units,
                                     core_weight=args.weight, **builds)
    mega_seconds, mega_cpu = time.monotonic() - start, children_cpu() - cpu_start
    for phase, objects in mega.phases.items():
        step = phase.split(":")[-1]
        seconds = mega.seconds.get(phase, 0.0) + mega.seconds.get(f"libtorch:{step}", 0.0)
        rows.append(("megabuild", phase, seconds, *split_counts(objects)))
    core_max = max(Counter(o for o in mega.compiled()
                           if harness.target_of(o) in harness.CORE_TARGETS).values())

    naive_seconds = naive_cpu = 0.0
    naive_core = naive_hip = naive_hipify = 0
    for version, python in venvs.items():
        progress(f"naive: clean build for Python {version} ...")
        cpu_start = children_cpu()
        with output_to(log):
            seconds, objects = harness.naive_build(python, work / f"naive-{version}",
                                                   core_units=args.units,
                                                   core_weight=args.weight, **builds)
        naive_hip += sum(1 for o in objects if o.endswith(".hip.o"))
        hipify_log = work / f"naive-{version}" / "src" / "hipify-runs.log"
        naive_hipify += len(hipify_log.read_text().splitlines()) if hipify_log.exists() else 0
        naive_seconds += seconds
        naive_cpu += children_cpu() - cpu_start
        core, py = split_counts(objects)
        naive_core += core
        rows.append(("naive", version, seconds, core, py))

    print(f"\n{'mode':<10} {'step':<14} {'wall s':>8} {'core objs':>10} {'python objs':>12}")
    for mode, step, seconds, core, py in rows:
        print(f"{mode:<10} {step:<14} {seconds:>8.1f} {core:>10} {py:>12}")
    mega_core, mega_py = split_counts(mega.compiled())
    print(f"{'megabuild':<10} {'total':<14} {mega_seconds:>8.1f} {mega_core:>10} {mega_py:>12}")
    print(f"{'naive':<10} {'total':<14} {naive_seconds:>8.1f} {naive_core:>10}")
    print(f"CPU time of child processes: megabuild {mega_cpu:.1f} s, naive {naive_cpu:.1f} s "
          f"(ratio {mega_cpu / naive_cpu:.2f}; less sensitive to other load on the machine)")
    if args.backend == "rocm":
        hipify_runs = len((mega.src / "hipify-runs.log").read_text().splitlines())
        mega_hip = sum(1 for o in mega.compiled() if o.endswith(".hip.o"))
        print(f"ROCm: hipify ran {hipify_runs}x, hipcc compiled the kernel {mega_hip}x "
              f"(for {harness.ROCM_TEST_ARCH}); naive: {naive_hipify}x and {naive_hip}x")
    ratio = mega_seconds / naive_seconds
    label = "megabuild" if args.backend == "cpu" else f"megabuild ({args.backend})"
    if args.frontend == "setup.py":
        print(f"{label}: {len(venvs)} pythons, CMake {args.cmake}, core objects compiled "
              f"{core_max}x, wall ratio {ratio:.2f} vs naive")
    else:
        real = [o for o in mega.compiled("split") if "cmTC_" not in o]  # not CMake's probes
        python_dependent = sum(1 for o in real if harness.target_of(o) in harness.PYTHON_TARGETS)
        switches = [[o for o in objs if "cmTC_" not in o] for phase, objs in mega.phases.items()
                    if phase.startswith("pytorch:")]
        most = max(len(objs) for objs in switches)
        print(f"python-dependent objects: {python_dependent} of {len(real)}")
        print(f"megabuild: {args.frontend}, {len(venvs)} Pythons, CMake {args.cmake}; wall ratio {ratio:.2f}; "
              f"python switch recompiles {most} of {len(real)} objects")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
