"""The run's options: the user's build request (localbuild/request.py) and what this machine, or a
Slurm task, decides for itself from its own environment and role."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .configs import host_platform
from .request import BuildRequest

ARTIFACTS = "build_artifacts"


@dataclass(frozen=True)
class Options:
    """Everything that shapes the plans: the user's build request, and what this machine (or a
    Slurm task) decides for itself from its own environment and role."""

    feedstock_root: Path
    request: BuildRequest = BuildRequest()
    debug: bool = False
    cpu_count: str = "1"
    ci: str = ""
    extra_run_args: tuple[str, ...] = ()
    stdin_is_tty: bool = False
    stamp: str = "0"
    host: str = field(default_factory=host_platform)
    index: str = "after-build"         # "skip": a Slurm array task; "only": the array's final job
    task_output: str | None = None     # a Slurm task's own output folder, relative to build_artifacts/

    @property
    def artifacts(self) -> Path:
        return self.feedstock_root / ARTIFACTS


def default_cpu_count(environ: dict[str, str]) -> str:
    return environ.get("CPU_COUNT") or str(usable_cores())


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
