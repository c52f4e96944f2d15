"""Upper bounds on pytorch for the dependents a channel would carry (recipe/dependents.yaml,
`channel: true`): a new pytorch must not be installable under a released package it was never
checked with. A conda-sdist's package is pinned by libtorch's and pytorch's run_exports (the
recipe's); a conda-wheel's by its entry's `torch` spec, which becomes its pytorch run
constraint (a pip wheel a channel carried would be repackaged the same way)."""
from __future__ import annotations

import re

from ...dependents_catalog import CATALOG, Dependent, load_catalog
from ...layout import Feedstock
from ..ci.jobs import CiJob
from ..render.outputs import render_job

_OPERATOR = re.compile(r"^\s*(==|!=|<=|>=|~=|<|>|=)?\s*(.*?)\s*$")
PINNED_BY = {"libtorch": ("libtorch",), "pytorch": ("pytorch", "libtorch")}  # output -> names it pins


def upper_bounded(spec: str) -> bool:
    """Whether a conda version spec excludes every version above some point: each `|`
    alternative has a `<`, `<=`, `==`, `~=` or exact/glob part (`2.13.*`, `2.13.0`)."""
    for alternative in spec.split("|"):
        bounded = False
        for part in alternative.split(","):
            operator, version = _OPERATOR.match(part).groups()
            if operator in ("<", "<=", "==", "=", "~=") or (operator is None and version not in ("", "*")):
                bounded = True
        if not bounded:
            return False
    return bool(spec.strip())


def _pins(jobs: list[CiJob], feedstock: Feedstock) -> dict[str, set[str]]:
    """name -> every spec the libtorch and pytorch outputs' run_exports give it, over all jobs."""
    found: dict[str, set[str]] = {name: set() for name in ("libtorch", "pytorch")}
    for job in jobs:
        for output in render_job(feedstock, job.name, job.config):
            if output.name in PINNED_BY:
                for pin in output.run_exports or []:
                    name, _, spec = str(pin).partition(" ")
                    if name in found:
                        found[name].add(spec.strip())
    return found


def _sdist_findings(dependent: Dependent, pins: dict[str, set[str]]) -> list[str]:
    findings = []
    for name, specs in pins.items():
        where = f"{CATALOG}: {dependent.name} (channel: true, built against our {name})"
        if not specs:
            findings.append(f"{where}: no output's run_exports pins {name}, so its package would not bound "
                            f"it; add {{{{ pin_subpackage('{name}', max_pin='x.x') }}}} to recipe/meta.yaml")
        for spec in sorted(s for s in specs if not upper_bounded(s)):
            findings.append(f"{where}: the run_exports pin {f'{name} {spec}'.strip()!r} has no upper bound; "
                            "use max_pin='x.x' (no stable C++ ABI)")
    return findings


def check_dependent_bounds(feedstock: Feedstock, jobs: list[CiJob]) -> list[str]:
    """One finding per channel dependent whose package would not bound pytorch/libtorch from above."""
    catalog = feedstock.root / CATALOG
    if not catalog.exists():
        return []
    carried = [d for d in load_catalog(catalog) if d.channel]
    pins = _pins(jobs, feedstock) if any(d.kind == "conda-sdist" for d in carried) else {}
    findings: list[str] = []
    for dependent in carried:
        if dependent.kind == "conda-sdist":
            findings += _sdist_findings(dependent, pins)
        elif not upper_bounded(dependent.torch):
            findings.append(f"{CATALOG}: {dependent.name} (channel: true) has torch {dependent.torch!r}, no upper "
                            "bound: its package's pytorch run constraint would admit every future pytorch; "
                            "bound it (e.g. '>=2.0,<2.15') and lift it when `downstream --compare` says it works")
    return findings
