"""Lint checks that hold the recipe to what the build driver really does.

- Every `USE_SYSTEM_<X>` the driver sets for a variant points CMake at a library the channel
  must provide, so that package must be in the host requirements of every step that runs
  CMake (the top level and the pytorch output; `megabuild.steps.CONFIGURING_STEPS`).
- The version PyTorch will report (`PYTORCH_BUILD_VERSION`, plus `.post<N>` for a
  `PYTORCH_BUILD_NUMBER` above 1) must equal the conda version and the version the recipe's
  tests assert.

- The steps that run CMake require `cmake` in exactly the range the driver accepts and the
  suite tests (`megabuild.tool_versions.CMAKE_SPEC`), so a build never gets a CMake the
  driver would refuse or nobody has tried.

All ask the driver's own code (`driver_facts`), never a copy of its rules.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from ..ci.jobs import CiJob
from ...layout import Feedstock
from ..render.outputs import render_job
from ..render.variants import PlatformMatrix
from .driver_facts import (DriverRefusal, cmake_spec, configuring_steps, reported_version,
                           system_library_packages)

TOP_LEVEL = "libtorch-split"
# python -c "...; assert torch.__version__... == '2.13.0' ..."
_VERSION_ASSERT = re.compile(r"__version__.*?==\s*['\"]([^'\"]+)['\"]")


def _names(requirements: Iterable[Any]) -> set[str]:
    return {str(r).split()[0] for r in requirements or [] if str(r).strip()}


def _host(data: dict[str, Any]) -> set[str]:
    requirements = data.get("requirements") or {}
    return _names(requirements.get("host") if isinstance(requirements, dict) else [])


def check_system_library_hosts(feedstock: Feedstock, matrices: list[PlatformMatrix]) -> list[str]:
    steps = configuring_steps(feedstock.recipe_dir)
    missing: dict[tuple[str, str, str], set[str]] = {}
    for matrix in matrices:
        for use in matrix.built:
            variant = {k: str(v) for k, v in use.variant.items()}
            hosts = {TOP_LEVEL: _host(use.render.top)} if TOP_LEVEL in steps else {}
            hosts.update({o.name: _host(o.data) for o in use.outputs if o.name in steps})
            for variable, package in system_library_packages(feedstock.recipe_dir, variant).items():
                for step, host in hosts.items():
                    if package not in host:
                        missing.setdefault((variable, package, step), set()).add(matrix.platform.subdir)
    return [f"recipe/meta.yaml: the driver sets {variable}=1 (megabuild/build_env.py) but "
            f"'{package}' is not in the host requirements of {step} ({', '.join(sorted(subdirs))}); "
            f"add {package} to its host section"
            for (variable, package, step), subdirs in sorted(missing.items())]


def _build(data: dict[str, Any]) -> list[str]:
    requirements = data.get("requirements") or {}
    return [str(r).strip() for r in (requirements.get("build") if isinstance(requirements, dict) else None) or []]


def check_cmake_pin(feedstock: Feedstock, matrices: list[PlatformMatrix]) -> list[str]:
    """Every step that runs CMake requires `cmake` as megabuild/tool_versions.py pins it."""
    steps = configuring_steps(feedstock.recipe_dir)
    spec = cmake_spec(feedstock.recipe_dir)
    wrong: dict[tuple[str, str], set[str]] = {}
    for matrix in matrices:
        for use in matrix.built:
            builds = {TOP_LEVEL: _build(use.render.top)} if TOP_LEVEL in steps else {}
            builds.update({o.name: _build(o.data) for o in use.outputs if o.name in steps})
            for step, requirements in builds.items():
                found = [r for r in requirements if r.split()[0] == "cmake"]
                if [" ".join(r.split()) for r in found] != [spec]:
                    wrong.setdefault((step, ", ".join(found) or "no cmake"), set()).add(matrix.platform.subdir)
    return [f"recipe/meta.yaml: the build requirements of {step} have {found}, not '{spec}', the "
            f"CMake range the driver accepts and the suite tests (recipe/megabuild/tool_versions.py); "
            f"write '{spec}' ({', '.join(sorted(subdirs))})"
            for (step, found), subdirs in sorted(wrong.items())]


def check_reported_version(feedstock: Feedstock, jobs: list[CiJob]) -> list[str]:
    """Also where a variant the driver refuses shows up: one finding per job, never a traceback."""
    findings: list[str] = []
    for job in jobs:
        for out in render_job(feedstock, job.name, job.config):
            if out.name != "pytorch":
                continue
            commands = [str(c) for c in (out.tests.get("commands") or [])]
            asserted = {m.group(1) for c in commands for m in _VERSION_ASSERT.finditer(c)}
            try:
                reported, number = reported_version(feedstock.recipe_dir, out.variant, out.version,
                                                    out.build_number)
            except DriverRefusal as err:
                findings.append(f"recipe/conda_build_config.yaml: the build driver refuses "
                                f"config {job.name}: {err}")
                continue
            where = f"recipe/meta.yaml: pytorch in {job.name}"
            if not asserted:
                findings.append(f"{where}: no test asserts torch.__version__; add one that "
                                f"compares it with '{out.version}'")
            for version in sorted(asserted | {out.version}):
                if version != reported:
                    findings.append(
                        f"{where}: PyTorch will report {reported} (PYTORCH_BUILD_VERSION, "
                        f"PYTORCH_BUILD_NUMBER={number}) but the recipe expects {version}; "
                        "the driver must pass PYTORCH_BUILD_NUMBER=0")
    return sorted(set(findings))
