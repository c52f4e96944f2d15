"""A config without the gpu_backend key: both recipes decide as the driver does
(megabuild/build_env.gpu_backend), from the CUDA or ROCm version, so the packages are the
CUDA or ROCm ones the build makes, not CPU packages with CUDA inside.

Everything is compared, not only names: requirements of every section, run_exports, tests,
de-prioritisation and what each build script takes from the environment. conda-build reads a
`# [gpu_backend == ...]` selector with the key missing as false, so meta.yaml must decide with
its Jinja default, not with selectors; rattler-build reads recipe.yaml's context the same way."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.feedstock_copy import copy_feedstock
from tests.support.paths import REPO_ROOT

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")

from common.driver import driver_module  # noqa: E402
from feedstock.before_build.checks.parity import from_meta, load_v1_recipe, rattler_outputs  # noqa: E402
from feedstock.before_build.render.outputs import load_ci_config, render_job  # noqa: E402
from feedstock.layout import load_feedstock  # noqa: E402

JOBS = sorted(path.stem for path in (REPO_ROOT / ".ci_support").glob("*.yaml"))
_JOB_KEY = re.compile(r"^gpu_backend:\n(?:- .*\n)+", re.MULTILINE)
_JOB_ZIP = "- - gpu_backend\n  - cuda_compiler_version\n"
_CONFIG_KEY = re.compile(r"^gpu_backend:\n(?:  - .*\n)+", re.MULTILINE)
_CONFIG_ZIP = "  - - gpu_backend\n    - cuda_compiler_version\n"


def _drop(text: str, key: re.Pattern, zipped: str, unzipped: str) -> str:
    """`text` without the gpu_backend values and without the key in its zip group."""
    assert len(key.findall(text)) == 1 and text.count(zipped) == 1, text[:200]
    return key.sub("", text).replace(zipped, unzipped)


@pytest.fixture(scope="module")
def keyless(tmp_path_factory) -> Path:
    """The feedstock with gpu_backend gone from recipe/conda_build_config.yaml and every job."""
    root = copy_feedstock(tmp_path_factory.mktemp("keyless") / "feedstock")
    config = root / "recipe" / "conda_build_config.yaml"
    config.write_text(_drop(config.read_text(), _CONFIG_KEY, _CONFIG_ZIP, "  - - cuda_compiler_version\n"))
    for job in (root / ".ci_support").glob("*.yaml"):
        job.write_text(_drop(job.read_text(), _JOB_KEY, _JOB_ZIP, "- - cuda_compiler_version\n"))
    return root


def _backend(job: str) -> str:
    return str(load_ci_config(REPO_ROOT / ".ci_support" / f"{job}.yaml")["gpu_backend"][0])


def test_the_driver_decides_from_the_versions():
    decide = driver_module(REPO_ROOT, "build_env").gpu_backend
    assert decide({"cuda_compiler_version": "12.9", "rocm_version": "None"}) == "cuda"
    assert decide({"cuda_compiler_version": "None", "rocm_version": "7.2"}) == "rocm"
    assert decide({"cuda_compiler_version": "None", "rocm_version": "None"}) == "cpu"


@pytest.mark.parametrize("job", JOBS)
def test_meta_yaml_without_the_key_is_the_same_packages(keyless, job):
    """As conda-build reads meta.yaml (selectors before and after Jinja), every output of the job."""
    def outputs(root: Path) -> list:
        feedstock = load_feedstock(root)
        return [from_meta(out) for out in render_job(feedstock, job, load_ci_config(root / ".ci_support" / f"{job}.yaml"))]

    with_key, without = outputs(REPO_ROOT), outputs(keyless)
    assert without == with_key
    flavour = {"cpu": "pytorch-cpu", "cuda": "pytorch-gpu", "rocm": "pytorch-rocm"}[_backend(job)]
    assert flavour in {out.name for out in without}
    if _backend(job) == "cuda":   # what a false selector used to drop
        names = {out.name for out in without}
        pytorch = next(out for out in without if out.name == "pytorch")
        assert "libtorch-cuda-linalg" in names and "__cuda" in pytorch.requirements["run"]
        assert any(r.startswith("triton ") for r in pytorch.requirements["run"])


@pytest.mark.parametrize("job", JOBS)
def test_recipe_yaml_without_the_key_is_the_same_packages(keyless, job):
    """As rattler-build reads recipe.yaml with the job file alone (--ignore-recipe-variants)."""
    recipe = load_v1_recipe(REPO_ROOT / "recipe" / "recipe.yaml")
    with_key = rattler_outputs(recipe, REPO_ROOT / ".ci_support" / f"{job}.yaml")
    without = rattler_outputs(recipe, keyless / ".ci_support" / f"{job}.yaml")
    assert sorted(without, key=lambda o: o.key) == sorted(with_key, key=lambda o: o.key)
