"""``rerender``: regenerate ``.ci_support/`` and the CI workflow from the recipe, the variant
config files, conda-forge.yml and ci-runners.yml."""
from __future__ import annotations

from pathlib import Path

from ...layout import Feedstock, load_feedstock
from ...text_input import read_text
from ..render.selector_check import refuse_bad_selectors
from ..render.variants import analyse_platform
from .jobs import CiJob, platform_jobs
from .support import Drift, compare, expected_files, leftovers, write_atomically
from .workflow import WORKFLOW_PATH, expected_workflow, settings, workflow_state


def compute_jobs(feedstock: Feedstock) -> list[CiJob]:
    """Every CI job of every platform, sorted by name (config -> variants -> jobs)."""
    jobs: list[CiJob] = []
    for platform in feedstock.platforms():
        jobs += platform_jobs(feedstock, analyse_platform(feedstock, platform))
    return sorted(jobs, key=lambda job: job.name)


def protected_files(feedstock: Feedstock) -> set[str]:
    """Files in .ci_support that are inputs, not generated (a pinning file kept there)."""
    pinning = feedstock.pinning_file
    if pinning and pinning.parent == feedstock.ci_support:
        return {pinning.name}
    return set()


def ci_drift(feedstock: Feedstock, jobs: list[CiJob]) -> Drift:
    """How .ci_support/ differs from the files of ``jobs`` (a protected input is not stale)."""
    drift = compare(feedstock.ci_support, expected_files(jobs))
    protected = protected_files(feedstock)
    drift.extra = [n for n in drift.extra if n not in protected]
    return drift


def check(root: Path) -> Drift:
    """What would change (.ci_support/ and the workflow); writes nothing."""
    feedstock = load_feedstock(root)
    refuse_bad_selectors(feedstock, "rerender --check wrote nothing")
    checked = settings(feedstock)   # before the renders: a bad ci-runners.yml is its line at once
    jobs = compute_jobs(feedstock)
    drift = ci_drift(feedstock, jobs)
    state = workflow_state(feedstock, expected_workflow(feedstock, jobs, checked))
    if state:
        drift.other[WORKFLOW_PATH] = state
    drift.leftovers = _leftovers(feedstock)
    return drift


def _leftovers(feedstock: Feedstock) -> list[str]:
    found = leftovers(feedstock.ci_support, [feedstock.root / WORKFLOW_PATH])
    return [str(path.relative_to(feedstock.root)) for path in found]


def rerender(root: Path) -> tuple[list[CiJob], Drift]:
    """Compute everything first (any error leaves .ci_support untouched), then write atomically."""
    feedstock = load_feedstock(root)
    refuse_bad_selectors(feedstock, "rerender wrote nothing")
    # the workflow's settings before every variant's render: a bad ci-runners.yml or
    # github_actions section is its one line at once, not after a second of rendering
    checked = settings(feedstock)
    jobs = compute_jobs(feedstock)
    workflow = expected_workflow(feedstock, jobs, checked)
    expected = expected_files(jobs)
    for name in protected_files(feedstock):
        # keep the input file: pretend it is expected as it is
        expected[name] = read_text(feedstock.ci_support / name, f".ci_support/{name}")
    state = workflow_state(feedstock, workflow)
    # one commit for .ci_support/ and the workflow: an interruption leaves both old or both new
    found = _leftovers(feedstock)
    drift = write_atomically(feedstock.ci_support, expected,
                             also={feedstock.root / WORKFLOW_PATH: workflow} if state else None,
                             sweep=[feedstock.root / path for path in found])
    drift.leftovers = found
    if state:
        drift.other[WORKFLOW_PATH] = state
    return jobs, drift
