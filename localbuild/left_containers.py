"""Containers that a killed run left building in this build_artifacts/.

The engine's client dying (kill -9 of build-locally and of its build's guard, an OOM kill)
leaves its container running, and the container goes on writing into build_artifacts/. Every
container build-locally starts carries the label ARTIFACTS_LABEL=<build_artifacts path>; a run
that holds the folder's lock asks the engine for running containers with that label before it
builds. Holding the lock, any it finds are no live run's: it waits for them to end, as for the
lock itself, or with --no-wait refuses (exit 4), naming each and the `rm -f` that stops it.
Stopped ones (a failed build's container, kept for inspection) are left as they are.
"""
from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path
from typing import Callable

from . import engine as engines
from .errors import EXIT_BUSY, LocalBuildError

POLL_SECONDS = 2.0


def running_containers(engine: engines.Engine, artifacts: Path) -> list[str]:
    """The running containers labelled for `artifacts` (none where the engine cannot tell)."""
    command = [engine.executable, "ps", "--filter", f"label={engines.ARTIFACTS_LABEL}={artifacts}",
               "--filter", "status=running", "--format", "{{.Names}}"]
    try:
        proc = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", env=engines.client_environment(), timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted(proc.stdout.split()) if proc.returncode == 0 else []


def wait_for_left_containers(engine: engines.Engine, artifacts: Path, wait: bool,
                             say: Callable[[str], None]) -> None:
    """Return once no container left by a killed run builds in `artifacts`; without `wait`,
    raise LocalBuildError (exit EXIT_BUSY) naming them."""
    told: list[str] = []
    while True:
        names = running_containers(engine, artifacts)
        if not names:
            return
        which = f"container{'s' if len(names) > 1 else ''} {', '.join(names)}"
        stop = f"{shlex.quote(engine.executable)} rm -f {' '.join(names)}"
        if not wait:
            raise LocalBuildError(
                f"{artifacts.name}/ is still being built into by {which}, left running by a "
                f"build-locally run that was killed; wait for it to end (run without --no-wait to "
                f"queue behind it) or stop it: {stop}", EXIT_BUSY)
        if names != told:
            say(f"waiting for {which}, left running in {artifacts.name}/ by a build-locally run "
                f"that was killed, to end (stop it: {stop}; --no-wait exits instead)")
            told = names
        time.sleep(POLL_SECONDS)


def check_plans(plans: list, engine: engines.Engine, artifacts: Path, wait: bool,
                say: Callable[[str], None]) -> None:
    """wait_for_left_containers, where a plan builds in a docker or podman container."""
    if any(plan.location == "container" for plan in plans):
        wait_for_left_containers(engine, artifacts, wait, say)
