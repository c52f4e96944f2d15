"""Checks run before anything starts; each failure is one line and exit status 3."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from . import engine as engines
from .errors import EXIT_PREFLIGHT, LocalBuildError
from .location import LOCATIONS
from .plan import ARTIFACTS, BuildPlan, usable_cores


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


# conda-build checks the pins between outputs of one recipe; before 25.3 it compares build
# strings literally, so our glob pins (`pytorch <v> <tag>_*_<n>`, `libtorch-cuda-linalg <v>
# <gpu>_*_<blas>_*`) fail with "Mismatching hashes in recipe" (recipe/README.md, "Builder
# versions"). localbuild/in_container/build_steps.sh installs the same minimum in containers.
MIN_CONDA_BUILD = (25, 3)
MIN_CONDA_BUILD_TEXT = ".".join(map(str, MIN_CONDA_BUILD))
_CONDA_BUILD_VERSION = re.compile(r"conda-build\s+(\d+)\.(\d+)(?:\.(\d+))?")


def parse_conda_build_version(output: str) -> tuple[int, ...] | None:
    """(major, minor[, patch]) from `conda-build --version` output ("conda-build 25.3.2")."""
    match = _CONDA_BUILD_VERSION.search(output)
    if match is None:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def check_conda_build_version(executable: str = "conda-build") -> tuple[int, ...]:
    """Refuse a conda-build that cannot finalize the recipe (older than MIN_CONDA_BUILD)."""
    found = shutil.which(executable) or executable
    fix = (f'update it (`conda install -n base "conda-build>={MIN_CONDA_BUILD_TEXT}"`) or drop '
           "--native to build in a container")
    try:
        proc = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise LocalBuildError(f"could not run `{found} --version` ({err}); {fix}",
                              EXIT_PREFLIGHT) from None
    output = (proc.stdout + proc.stderr).strip()
    version = parse_conda_build_version(output)
    if proc.returncode != 0 or version is None:
        shown = output.splitlines()[-1] if output else "no output"
        raise LocalBuildError(f"could not read the version of {found} (`--version` exit "
                              f"{proc.returncode}: {shown!r}); --native needs conda-build >= "
                              f"{MIN_CONDA_BUILD_TEXT}; {fix}", EXIT_PREFLIGHT)
    if version < MIN_CONDA_BUILD:
        raise LocalBuildError(
            f"{found} is conda-build {'.'.join(map(str, version))}, but this recipe needs "
            f">= {MIN_CONDA_BUILD_TEXT} (older versions reject its build-string glob pins with "
            f"\"Mismatching hashes in recipe\"); {fix}", EXIT_PREFLIGHT)
    return version


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
