"""Checks run before anything starts; each failure is one line and exit status 3."""
from __future__ import annotations

import os
from pathlib import Path

from . import engine as engines
from .errors import EXIT_PREFLIGHT, LocalBuildError
from .build_plan import BuildPlan
from .location import LOCATIONS
from .options import ARTIFACTS, usable_cores


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




def check_log_paths(plans: list[BuildPlan]) -> None:
    """Each config's log and the previous run's log (kept on rotation) must be files or absent:
    a folder there would fail that config after the others ran, blamed on the wrong file."""
    for plan in plans:
        for path in (plan.log, plan.log.with_name(plan.log.name[:-4] + ".previous.txt")):
            if os.path.lexists(path) and not path.is_file():
                kind = "a folder" if path.is_dir() else "not a regular file"
                raise LocalBuildError(f"{path} is {kind}; build-locally keeps {plan.name}'s logs there: "
                                      "move it away", EXIT_PREFLIGHT)


def run_all(plans: list[BuildPlan], engine: engines.Engine, feedstock_root: Path,
            cpu_count: str, min_free_gb: float | None, tool: str | None = None,
            environ: dict[str, str] | None = None) -> None:
    """Every check for the plans that will actually run, in a fixed order."""
    if not plans:
        return
    environ = dict(os.environ) if environ is None else environ
    for name in dict.fromkeys(plan.location for plan in plans):
        LOCATIONS[name].check([p for p in plans if p.location == name], engine, feedstock_root, tool, environ)
    check_cpu_count(cpu_count)
    check_log_paths(plans)
    check_disk(feedstock_root / ARTIFACTS, plans, min_free_gb)
