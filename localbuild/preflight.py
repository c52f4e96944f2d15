"""Checks run before anything starts; each failure is one line and exit status 3."""
from __future__ import annotations

import os
from pathlib import Path

from . import engine as engines
from .errors import EXIT_PREFLIGHT, LocalBuildError
from .plan import ARTIFACTS, BuildPlan, native_build_tool, usable_cores


def check_cpu_count(cpu_count: str) -> None:
    try:
        value = int(cpu_count)
    except ValueError:
        value = 0
    if value < 1:
        raise LocalBuildError(f"CPU_COUNT={cpu_count!r} is not a positive number; unset it or "
                              "give the number of cores to build with", EXIT_PREFLIGHT)
    cores = usable_cores()
    if value > cores:
        raise LocalBuildError(f"CPU_COUNT={value} but this machine has {cores} usable cores; "
                              f"set CPU_COUNT={cores} or less", EXIT_PREFLIGHT)


def free_gb(path: Path) -> float:
    """Free space of the filesystem holding ``path`` (or its nearest existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    stats = os.statvfs(probe)
    return stats.f_bavail * stats.f_frsize / 1e9


def disk_need(plans: list[BuildPlan], min_free_gb: float | None) -> tuple[float, str]:
    """(GB needed, which config needs it): the largest estimate, or --min-free-gb."""
    if min_free_gb is not None:
        return min_free_gb, "--min-free-gb"
    biggest = max(plans, key=lambda p: p.config.disk_estimate_gb)
    return float(biggest.config.disk_estimate_gb), biggest.name


def check_disk(artifacts: Path, plans: list[BuildPlan], min_free_gb: float | None) -> None:
    if not plans:
        return
    needed, who = disk_need(plans, min_free_gb)
    free = free_gb(artifacts)
    if free < needed:
        raise LocalBuildError(
            f"only {free:.1f} GB free for {artifacts}, but {who} needs about {needed:.0f} GB; "
            "free some space (e.g. docker system prune, or --prune between configs) or set the "
            "threshold with --min-free-gb N", EXIT_PREFLIGHT)


def check_native_tool(feedstock_root: Path) -> str:
    tool = native_build_tool(feedstock_root)
    if tool is None:
        raise LocalBuildError(
            "--native needs conda-build on PATH (e.g. `conda install -n base conda-build`), or "
            "rattler-build with a recipe/recipe.yaml; or drop --native to build in a container",
            EXIT_PREFLIGHT)
    return tool


def run_all(plans: list[BuildPlan], engine: engines.Engine, feedstock_root: Path,
            cpu_count: str, min_free_gb: float | None) -> None:
    """Every check for the plans that will actually run, in a fixed order."""
    if not plans:
        return
    if any(plan.backend == "docker" for plan in plans):
        engines.require_client(engine)
        engines.require_running(engine)
    if any(plan.backend == "native" for plan in plans):
        check_native_tool(feedstock_root)
    check_cpu_count(cpu_count)
    check_disk(feedstock_root / ARTIFACTS, plans, min_free_gb)
