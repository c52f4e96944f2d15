"""When each compile ran and how much memory it took, for the job-pool test and benchmark.

A compiler launcher (the hook ccache uses) runs every compile of the test project's build and
appends one JSON line per compile: object file, start and end time, and the peak RSS of the
compiler (`RUSAGE_CHILDREN`'s maxrss covers cc1plus, the process that holds the memory).
From those lines: how many compiles of a kind overlapped at most, and the build's peak memory
as the largest sum of peak RSS over compiles running at the same moment.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from tests.support import megabuild_harness as harness

HEAVY_TARGET = "flash_attention"  # the test project's heavy target, named as in PyTorch


@dataclass(frozen=True)
class Compile:
    obj: str
    start: float
    end: float
    peak_kib: int

    @property
    def target(self) -> str | None:
        return harness.target_of(self.obj)

    @property
    def heavy(self) -> bool:
        return self.target == HEAVY_TARGET


def write_timing_launcher(path: Path, log_file: Path) -> Path:
    path.write_text(f"""#!{sys.executable} -I
# runs one compile; appends its object file, start/end time and peak RSS to {log_file.name}
import json, os, resource, subprocess, sys, time
start = time.time()
code = subprocess.call(sys.argv[1:])
end = time.time()
args = sys.argv[1:]
obj = args[args.index("-o") + 1] if "-o" in args[:-1] else ""
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, largest descendant
line = json.dumps({{"obj": obj, "start": start, "end": end, "peak_kib": peak}}) + "\\n"
fd = os.open({str(log_file)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, line.encode())  # one small O_APPEND write: lines of parallel compiles never mix
os.close(fd)
sys.exit(code)
""")
    path.chmod(0o755)
    return path


def read_timeline(log_file: Path) -> list[Compile]:
    return [Compile(**json.loads(line)) for line in log_file.read_text().splitlines() if line.strip()]


def max_overlap(compiles: Iterable[Compile]) -> int:
    """The most of these compiles that ran at one moment."""
    events = sorted([(c.start, 1) for c in compiles] + [(c.end, -1) for c in compiles],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    running = most = 0
    for _, delta in events:
        running += delta
        most = max(most, running)
    return most


def peak_memory_kib(compiles: list[Compile]) -> int:
    """The largest sum of peak RSS over compiles running at one moment (an upper bound of what
    the build needed: each compile is counted at its own peak)."""
    return max((sum(o.peak_kib for o in compiles if o.start <= c.start < o.end) for c in compiles),
               default=0)


@dataclass
class PooledBuild:
    compiles: list[Compile]
    wall_s: float
    env: dict[str, str]

    def overlap(self, keep: Callable[[Compile], bool]) -> int:
        return max_overlap([c for c in self.compiles if keep(c)])


def pooled_build(venv_python: Path, work: Path, *, max_jobs: int, heavy_jobs: int | None,
                 heavy_units: int = 3, heavy_weight: int = 40, core_units: int = 12,
                 core_weight: int = 8) -> PooledBuild:
    """The driver's real split step (setup.py, CMake, Ninja) on the test project with one heavy
    target, every compile timed by the launcher. heavy_jobs=None sizes the pool from memory."""
    from megabuild.context import BuildContext
    from megabuild.frontend import SetupPyFrontend
    from megabuild.steps import run_step

    harness.check_tools()
    work.mkdir(parents=True, exist_ok=True)
    log_file = work / "timeline.jsonl"
    log_file.write_text("")
    launcher = write_timing_launcher(work / "timing-launcher.py", log_file)
    src = harness.copy_project(work / "src")
    base = harness.base_environ(launcher, core_units, core_weight, jobs=max_jobs)
    base["MEGATEST_HEAVY_UNITS"] = str(heavy_units)
    base["MEGATEST_HEAVY_WEIGHT"] = str(heavy_weight)
    if heavy_jobs is not None:
        base["FEEDSTOCK_HEAVY_JOBS"] = str(heavy_jobs)
    variant = {**harness.backend_variant("cpu"), "blas_impl": "generic", "target_platform": "linux-64",
               "megabuild": "true", "PKG_VERSION": "2.13.0", "CPU_COUNT": str(max_jobs),
               "PKG_NAME": "libtorch-split"}
    ctx = BuildContext.create(src, work / "prefix", venv_python, variant, base)
    started = time.monotonic()
    run_step(ctx, SetupPyFrontend())
    return PooledBuild(read_timeline(log_file), time.monotonic() - started, dict(ctx.env))
