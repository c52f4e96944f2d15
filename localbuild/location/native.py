"""This machine: its own conda-build, or rattler-build (on PATH, or py-rattler-build in a Python
of its own: localbuild/rattler.py), runs build_steps.sh on the feedstock where it lies."""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from common.driver import driver_module

from .. import rattler
from ..errors import EXIT_PREFLIGHT, LocalBuildError
from .mounts import BUILD_SCRIPT

if TYPE_CHECKING:
    from ..engine import Engine
    from ..build_plan import BuildPlan
    from ..options import Options



class NativeLocation:
    name = "native"
    in_container = False
    first_stop_signal = signal.SIGINT   # conda-build and rattler-build clean up after Ctrl-C

    def inside_root(self, options: "Options") -> str:
        return str(options.feedstock_root)

    def recipe_root(self, options: "Options") -> str:
        return str(options.feedstock_root / "recipe")

    def describe(self, options: "Options") -> str:
        return "native"

    def finish_plan(self, plan: "BuildPlan", options: "Options", env: dict[str, str], recipe_root: str) -> None:
        root = options.feedstock_root
        env.update({"FEEDSTOCK_ROOT": str(root), "RECIPE_ROOT": recipe_root,
                    "LOCALBUILD_NATIVE": "1", "BUILD_TOOL": plan.tool})
        plan.command = ["bash", str(root / BUILD_SCRIPT)]

    def check(self, plans: list["BuildPlan"], engine: "Engine", feedstock_root: Path, tool: str | None,
              environ: dict[str, str]) -> None:
        if tool == "rattler-build":
            rattler.check_native(feedstock_root, environ,
                                 develop=any(plan.develop_folder is not None for plan in plans))
        else:
            check_native_tool(feedstock_root)

    def process_environment(self, plan: "BuildPlan", environ: dict[str, str], env: dict[str, str]) -> None:
        # as in a container, only the flags decide these (a stale shell value must not turn a
        # release build into a dev build, or change its jobs): the driver's own list
        for name in driver_module(plan_root(plan), "overrides").FLAG_VARIABLES:
            env.pop(name, None)
        env.update(plan.env)


def plan_root(plan: "BuildPlan") -> Path:
    """The feedstock of the plan's config (.ci_support/ is at its top)."""
    return plan.config.path.parent.parent


def native_build_tool(feedstock_root: Path) -> str | None:
    """conda-build if installed; rattler-build if installed and the recipe has recipe.yaml."""
    if shutil.which("conda-build"):
        return "conda-build"
    if shutil.which("rattler-build") and (feedstock_root / "recipe" / "recipe.yaml").is_file():
        return "rattler-build"
    return None


def check_native_tool(feedstock_root: Path) -> str:
    tool = native_build_tool(feedstock_root)
    if tool is None:
        raise LocalBuildError(
            f"--native needs conda-build >= {MIN_CONDA_BUILD_TEXT} on PATH (e.g. `conda install "
            f'-n base "conda-build>={MIN_CONDA_BUILD_TEXT}"`), or rattler-build with a '
            "recipe/recipe.yaml; or drop --native to build in a container", EXIT_PREFLIGHT)
    if tool == "conda-build":
        check_conda_build_version()
    return tool


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
