"""--tool rattler-build: which rattler-build runs, and the exact command build_steps.sh gives it.

In a container the image's conda installs the `rattler-build` executable. With --native it is
the `rattler-build` on PATH, or else py-rattler-build in a Python that has it (RATTLER_BUILD_PYTHON,
or the feedstock's .venv), driven by localbuild/in_container/rattler_build_py.py: this package stays standard
library only, so it never imports rattler_build itself, it only starts that Python.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .errors import EXIT_PREFLIGHT, LocalBuildError

TOOLS = ("conda-build", "rattler-build")
PYTHON_VARIABLE = "RATTLER_BUILD_PYTHON"
PY_DRIVER = "localbuild/in_container/rattler_build_py.py"


def native_python(feedstock_root: Path, environ: dict[str, str]) -> str | None:
    """The Python meant to run py-rattler-build: $RATTLER_BUILD_PYTHON, else .venv/bin/python."""
    if environ.get(PYTHON_VARIABLE):
        return environ[PYTHON_VARIABLE]
    venv = feedstock_root / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else None


def native_runner(feedstock_root: Path, environ: dict[str, str]) -> tuple[list[str], str | None]:
    """(argv prefix, Python for build_steps.sh or None): rattler-build on PATH wins unless
    RATTLER_BUILD_PYTHON names a Python explicitly."""
    if not environ.get(PYTHON_VARIABLE) and shutil.which("rattler-build", path=environ.get("PATH")):
        return ["rattler-build"], None
    python = native_python(feedstock_root, environ)
    if python is None:
        return ["rattler-build"], None
    return [python, str(feedstock_root / PY_DRIVER)], python


def build_command(runner: list[str], recipe_root: str, config_file: str, artifacts: str,
                  skip_tests: bool = False) -> list[str]:
    """What build_steps.sh runs for BUILD_TOOL=rattler-build (keep the two in step).

    No --channel: rattler-build takes the channels from the job file's channel_sources and
    refuses both ("channel_sources and channels cannot both be set"). The job file is already
    the merge of pinning.yaml and conda_build_config.yaml, hence --ignore-recipe-variants."""
    return [*runner, "build", "--recipe", f"{recipe_root}/recipe.yaml", "-m", config_file,
            "--ignore-recipe-variants", "--output-dir", artifacts,
            *(["--test", "skip"] if skip_tests else [])]


def check_native(feedstock_root: Path, environ: dict[str, str], develop: bool = False) -> None:
    """One line and exit 3 when --native --tool rattler-build has nothing to run. --develop makes
    its environment with py-rattler too, in a Python of this machine: the executable is not enough."""
    if not (feedstock_root / "recipe" / "recipe.yaml").is_file():
        raise LocalBuildError("--tool rattler-build needs recipe/recipe.yaml, which this feedstock "
                              "lacks; build with --tool conda-build", EXIT_PREFLIGHT)
    if develop:
        python, modules = native_python(feedstock_root, environ), "rattler, rattler_build"
    else:
        runner, python = native_runner(feedstock_root, environ)
        modules = "rattler_build.cli_api"
    if python is None:
        if not develop and shutil.which("rattler-build", path=environ.get("PATH")):
            return
        found = "no Python with py-rattler-build (set RATTLER_BUILD_PYTHON or create .venv)"
    else:
        try:
            proc = subprocess.run([python, "-c", f"import {modules}"],
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode == 0:
                return
            found = f"{python} cannot import {modules.replace(', ', ' and ')}"
        except (OSError, subprocess.TimeoutExpired) as err:
            found = f"cannot run {python} ({getattr(err, 'strerror', None) or err})"
    if develop:
        raise LocalBuildError(
            f"--develop --native needs a Python with py-rattler-build and py-rattler; {found}: set "
            "RATTLER_BUILD_PYTHON to one (pip install py-rattler-build py-rattler), or create the "
            "feedstock's .venv (devtools/run-tests makes it)", EXIT_PREFLIGHT)
    raise LocalBuildError(
        f"--native --tool rattler-build needs rattler-build on PATH or a Python with "
        f"py-rattler-build; {found}: install one (`conda install rattler-build`, or "
        f"`pip install py-rattler-build`) or use --tool conda-build", EXIT_PREFLIGHT)
