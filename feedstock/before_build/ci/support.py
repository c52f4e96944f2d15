"""Write and compare ``.ci_support/<job>.yaml`` files in conda-smithy's exact YAML format.

Writing is atomic for the whole folder: every file goes to a temporary folder next to
``.ci_support`` first; only when all are written do they replace the old ones, and stale
files are removed last.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...atomic_files import leftover_temps, replace_files
from ...text_input import read_compared
from .jobs import CiJob


class _CiDumper(yaml.Dumper):
    """PyYAML's default dumper (sorted keys), except that OrderedDicts keep their order."""


def _represent_ordered(dumper: yaml.Dumper, data: OrderedDict) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", list(data.items()))


_CiDumper.add_representer(OrderedDict, _represent_ordered)
_CiDumper.add_representer(tuple, yaml.representer.SafeRepresenter.represent_list)


def job_yaml(config: dict[str, Any]) -> str:
    """The file content for one job: keys sorted, lists in block style, pins in conda-smithy order."""
    data = dict(config)
    if "pin_run_as_build" in data:
        data["pin_run_as_build"] = OrderedDict(
            (pkg, OrderedDict(pins.items())) for pkg, pins in data["pin_run_as_build"].items())
    return yaml.dump(data, Dumper=_CiDumper, default_flow_style=False)


def expected_files(jobs: list[CiJob]) -> dict[str, str]:
    return {f"{job.name}.yaml": job_yaml(job.config) for job in jobs}


def current_files(folder: Path) -> dict[str, str]:
    if not folder.is_dir():
        return {}
    # generated files, compared for staleness: one that is not UTF-8 text is simply stale
    return {p.name: read_compared(p, f".ci_support/{p.name}")
            for p in sorted(folder.glob("*.yaml")) if p.is_file()}


@dataclass
class Drift:
    stale: list[str]      # present but different
    missing: list[str]    # should exist, does not
    extra: list[str]      # exists, should not
    # other generated files (the CI workflow), by path from the feedstock root: "missing" | "out of date"
    other: dict[str, str] = field(default_factory=dict)
    # temporary files a killed rerender left, by path from the feedstock root (rerender removes them)
    leftovers: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.stale or self.missing or self.extra or self.other or self.leftovers)

    def lines(self) -> list[str]:
        return ([f".ci_support/{n}: out of date" for n in self.stale]
                + [f".ci_support/{n}: missing" for n in self.missing]
                + [f".ci_support/{n}: not produced by the current recipe and pinning (stale file)" for n in self.extra]
                + [f"{path}: {state}" for path, state in sorted(self.other.items())]
                + [f"{path}: a temporary file an interrupted rerender left (rerender removes it)"
                   for path in self.leftovers])


def compare(folder: Path, expected: dict[str, str]) -> Drift:
    current = current_files(folder)
    return Drift(
        stale=sorted(n for n in expected if n in current and current[n] != expected[n]),
        missing=sorted(n for n in expected if n not in current),
        extra=sorted(n for n in current if n not in expected),
    )


def leftovers(folder: Path, also: list[Path]) -> list[Path]:
    """What a killed rerender left: temporary files of the job files in `folder` and of `also`."""
    found = leftover_temps(folder, ".yaml")
    for path in also:
        found += leftover_temps(path.parent, path.name)
    return found


def write_atomically(folder: Path, expected: dict[str, str],
                     also: dict[Path, str] | None = None, sweep: list[Path] = ()) -> Drift:
    """Make ``folder``'s *.yaml exactly ``expected`` and write the files of ``also`` (the
    workflow), all or nothing, also under Ctrl-C; returns what changed in ``folder``. The
    temporary files a killed writer left (``sweep``: of ``folder``'s job files and those
    paths) go too: the caller holds the feedstock's lock. Other files stay."""
    drift = compare(folder, expected)
    contents = {folder / name: text for name, text in expected.items()}
    replace_files({**contents, **(also or {})}, remove=[*(folder / name for name in drift.extra), *sweep])
    return drift
