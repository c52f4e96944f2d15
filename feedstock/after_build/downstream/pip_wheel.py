"""kind pip-wheel: `pip install NAME==VERSION` into an environment that has our pytorch.

pip must see our torch (its dist-info) and install no torch and no NVIDIA wheel next to it: the
install is planned first (`--dry-run --report`) and refused, with the environment untouched,
when the plan replaces or adds one of those."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ...dependents_catalog import Dependent
from .environment import clean_environ
from .testrun import first_line

# what pip must never put next to a conda pytorch: the runtime it already has
FORBIDDEN = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")


class PipRefused(Exception):
    """str(): one line, what pip planned or why it failed."""


def _pip(python: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, env=clean_environ(python=python), cwd=cwd, timeout=1800)


def planned(python: Path, requirements: list[str], cwd: Path) -> list[tuple[str, str]]:
    """(name, version) of every distribution pip would install for the requirements."""
    report = cwd / "pip-plan.json"
    proc = _pip(python, ["install", "--dry-run", "--quiet", "--report", str(report), *requirements], cwd)
    if proc.returncode != 0:
        error = next((l for l in proc.stderr.splitlines() if l.startswith("ERROR")), first_line(proc.stderr))
        raise PipRefused(f"pip cannot install {' '.join(requirements)}: {error[:200]}")
    items = json.loads(report.read_text()).get("install") or []
    return [(re.sub(r"[-_.]+", "-", i["metadata"]["name"]).lower(), i["metadata"]["version"]) for i in items]


def install(python: Path, dependent: Dependent, extra: list[str], cwd: Path) -> list[tuple[str, str]]:
    """Plan, check, install; returns what pip installed."""
    requirements = [f"{dependent.name}=={dependent.version}", *extra]
    plan = planned(python, requirements, cwd)
    bad = [f"{n} {v}" for n, v in plan if FORBIDDEN.match(n)]
    if bad:
        raise PipRefused(f"pip would install {', '.join(bad)} next to our pytorch (it does not see "
                         "our torch, or the wheel wants another version); nothing installed")
    proc = _pip(python, ["install", "--quiet", *requirements], cwd)
    if proc.returncode != 0:
        raise PipRefused(f"pip install failed: {first_line(proc.stderr)}")
    return plan
