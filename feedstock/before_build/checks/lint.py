"""``lint``: findings a maintainer must fix before pushing, one line each."""
from __future__ import annotations

from pathlib import Path

from ..ci.jobs import CiJob, platform_jobs
from ..ci.rerender import ci_drift
from ..ci.workflow import WORKFLOW_PATH, expected_workflow, workflow_state
from ...errors import FeedstockError
from ...text_input import UnreadableInput
from ...layout import Feedstock, escapes, load_feedstock
from ..render.outputs import render_job
from ..render.selector_check import all_variant_keys as _all_keys, check_selectors
from ..render.variant_config import parse_config_file
from ..render.variants import PlatformMatrix, analyse_platform
from .build_consistency import check_cmake_pin, check_reported_version, check_system_library_hosts
from .dependent_bounds import check_dependent_bounds
from .override_variables import check_override_variables
from .parity import lint_findings as parity_findings

PATCH_SUFFIXES = (".patch", ".diff")
TEST_KEYS = ("commands", "imports", "script", "downstreams")


def _rel(feedstock: Feedstock, path: Path) -> str:
    try:
        return str(path.relative_to(feedstock.root))
    except ValueError:
        return str(path)


def check_zip_keys(feedstock: Feedstock) -> list[str]:
    """Each variant config file, on each platform: zip_keys groups complete and of equal lengths."""
    findings = []
    for path in feedstock.variant_config_files():
        for platform in feedstock.platforms():
            try:
                parse_config_file(path, platform, feedstock.root, feedstock.build_platform(platform))
            except UnreadableInput:
                raise
            except FeedstockError as err:
                if str(err) not in findings:
                    findings.append(str(err))
    return findings


def _listed_patches(matrices: list[PlatformMatrix]) -> set[str]:
    listed: set[str] = set()
    for matrix in matrices:
        # every variant: a patch may be listed under a selector (e.g. CUDA variants only)
        for use in matrix.built:
            sources = use.render.top.get("source") or []
            for source in sources if isinstance(sources, list) else [sources]:
                for patch in (source or {}).get("patches") or []:
                    listed.add(str(patch))
    return listed


def check_patches(feedstock: Feedstock, matrices: list[PlatformMatrix]) -> list[str]:
    findings = []
    listed = _listed_patches(matrices)
    for patch in sorted(listed):
        outside = escapes(feedstock.root, feedstock.recipe_dir, patch)
        if outside:
            findings.append(f"recipe/meta.yaml: patch {outside}; keep patches in recipe/patches/")
        elif not (feedstock.recipe_dir / patch).is_file():
            findings.append(f"recipe/meta.yaml: patch {patch} is listed but recipe/{patch} does not exist")
    listed_paths = {(feedstock.recipe_dir / p).resolve() for p in listed}
    patch_dir = feedstock.recipe_dir / "patches"
    if patch_dir.is_dir():
        for path in sorted(patch_dir.rglob("*")):
            if path.is_file() and path.suffix in PATCH_SUFFIXES and path.resolve() not in listed_paths:
                findings.append(f"{_rel(feedstock, path)}: not listed under source/patches in recipe/meta.yaml; "
                                "list it or delete it")
    return findings


def check_tests(matrices: list[PlatformMatrix]) -> list[str]:
    untested: dict[str, set[str]] = {}
    for matrix in matrices:
        for use in matrix.built:
            for output in use.outputs:
                test = output.data.get("test") or {}
                if not any(test.get(k) for k in TEST_KEYS):
                    untested.setdefault(output.name, set()).add(matrix.platform.subdir)
    return [f"recipe/meta.yaml: output '{name}' has no test (commands, imports or script) on "
            f"{', '.join(sorted(platforms))}" for name, platforms in sorted(untested.items())]


def check_test_commands(matrices: list[PlatformMatrix]) -> list[str]:
    """Test commands that can never fail: conda-build runs them under ``set -e``, which ignores
    the status of a command negated with ``!`` (``! grep -q x f`` passes whatever grep finds)."""
    vacuous: dict[tuple[str, str], set[str]] = {}
    for matrix in matrices:
        for use in matrix.built:
            for output in use.outputs:
                for command in (output.data.get("test") or {}).get("commands") or []:
                    text = str(command).strip()
                    if text.startswith("!") and text[1:2].isspace():
                        vacuous.setdefault((output.name, text), set()).add(matrix.platform.subdir)
    return [f"recipe/meta.yaml: output '{name}' test command [{text}] cannot fail (set -e ignores '!'); "
            f"write: if CMD; then exit 1; fi ({', '.join(sorted(platforms))})"
            for (name, text), platforms in sorted(vacuous.items())]


def check_build_strings(feedstock: Feedstock, jobs: list[CiJob]) -> list[str]:
    """No two jobs (or two variants of one job) may produce the same package file."""
    findings = []
    producers: dict[tuple[str, str, str, str], list[str]] = {}
    variants_of: dict[tuple[str, str, str, str], set] = {}
    for job in jobs:
        for out in render_job(feedstock, job.name, job.config):
            key = (out.target_platform, out.name, out.version, out.build_string)
            producers.setdefault(key, [])
            if job.name not in producers[key]:
                producers[key].append(job.name)
            variants_of.setdefault(key, set()).add(tuple(sorted(out.variant.items())))
    for key, names in sorted(producers.items()):
        package = f"{key[0]}/{key[1]}-{key[2]}-{key[3]}"
        if len(names) > 1:
            findings.append(f"build string not unique: {package} is built by {', '.join(names)}")
        elif len(variants_of[key]) > 1:
            findings.append(f"build string not unique: {package} stands for {len(variants_of[key])} different "
                            f"variants in {names[0]}; put the differing key in build/string")
    return findings


def lint(root: Path) -> list[str]:
    """All findings (empty when the feedstock is clean)."""
    feedstock = load_feedstock(root)
    findings: list[str] = []
    findings += check_zip_keys(feedstock)
    matrices: list[PlatformMatrix] = []
    variant_keys: set[str] = set()
    try:
        for platform in feedstock.platforms():
            matrices.append(analyse_platform(feedstock, platform))
            variant_keys |= set(matrices[-1].spec)
    except UnreadableInput:
        raise
    except FeedstockError as err:
        if str(err) not in findings:
            findings.append(str(err))
        return findings + check_selectors(feedstock, variant_keys | _all_keys(feedstock))
    findings += check_selectors(feedstock, variant_keys)
    findings += check_patches(feedstock, matrices)
    findings += check_tests(matrices)
    findings += check_test_commands(matrices)
    jobs = [job for matrix in matrices for job in platform_jobs(feedstock, matrix)]
    findings += [f"{line}; run: python -m feedstock rerender" for line in ci_drift(feedstock, jobs).lines()]
    findings += check_workflow(feedstock, jobs)
    findings += check_build_strings(feedstock, jobs)
    findings += check_system_library_hosts(feedstock, matrices)
    findings += check_cmake_pin(feedstock, matrices)
    findings += check_reported_version(feedstock, jobs)
    findings += check_dependent_bounds(feedstock, jobs)
    findings += check_override_variables(feedstock, matrices)
    findings += parity_findings(root)
    return findings


def check_workflow(feedstock: Feedstock, jobs: list[CiJob]) -> list[str]:
    """The committed CI workflow is what rerender writes from conda-forge.yml, ci-runners.yml
    and the jobs (a bad or unknown setting there is a finding too)."""
    try:
        state = workflow_state(feedstock, expected_workflow(feedstock, jobs))
    except UnreadableInput:
        raise
    except FeedstockError as err:
        return [str(err)]
    return [f"{WORKFLOW_PATH}: {state}; run: python -m feedstock rerender"] if state else []


