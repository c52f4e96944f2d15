"""The ROCm packages stay apart from the CPU and CUDA ones, and say where their ROCm comes from.

Rendered from the committed recipe and .ci_support jobs (feedstock.before_build.render): build strings
(tests/feedstock/before_build/render/test_outputs.py) and, here, run_constrained between the flavours and the
package description that tells a user the ROCm build is not relocatable.
"""
from __future__ import annotations

import pytest
import yaml

from tests.support.paths import RECIPE_VERSION, REPO_ROOT
from feedstock.layout import load_feedstock
from feedstock.platforms import Platform
from feedstock.before_build.render.recipe_render import read_recipe, render_recipe_text
from feedstock.before_build.render.outputs import job_variants, render_ci_config
from feedstock.before_build.render.variants import smithy_environ

CONFIGS = sorted(p.stem for p in (REPO_ROOT / ".ci_support").glob("*.yaml"))
FLAVOURS = {"cpu": "pytorch-cpu", "cuda": "pytorch-gpu", "rocm": "pytorch-rocm"}
VERSION = RECIPE_VERSION


def job(config: str) -> dict:
    return yaml.safe_load((REPO_ROOT / ".ci_support" / f"{config}.yaml").read_text())


def test_the_matrix_has_rocm_jobs() -> None:
    assert [c for c in CONFIGS if job(c)["gpu_backend"] == ["rocm"]]


@pytest.mark.parametrize("config", CONFIGS)
def test_flavours_constrain_each_other(config: str) -> None:
    backend = job(config)["gpu_backend"][0]
    by_name = {o.name: o for o in render_ci_config(REPO_ROOT, config)}
    for name in ("libtorch", "pytorch"):
        constrained = by_name[name].requirements.get("run_constrained", [])
        for flavour, meta in FLAVOURS.items():
            wanted = f"{meta} {VERSION}" if flavour == backend else f"{meta} <0.0a0"
            assert wanted in constrained, (name, constrained)


@pytest.mark.parametrize("config", [c for c in CONFIGS if job(c)["gpu_backend"] == ["rocm"]])
def test_rocm_outputs_say_they_need_the_system_rocm(config: str) -> None:
    """What `conda search --info pytorch-rocm` shows a user before installing."""
    values = job(config)
    feedstock = load_feedstock(REPO_ROOT)
    platform = Platform(values["target_platform"][0])
    raw = read_recipe(feedstock.recipe_dir)
    variant = job_variants(feedstock, values, platform)[0]
    render = render_recipe_text(raw, platform, variant, feedstock.recipe_dir,
                                environ=smithy_environ(feedstock, platform, raw))
    rocm = values["rocm_version"][0]
    described = {o["name"]: " ".join(str((o.get("about") or {}).get("description", "")).split())
                 for o in render.outputs}
    for name in ("libtorch", "pytorch", "pytorch-rocm"):
        assert "/opt/rocm" in described[name] and f"ROCm {rocm}" in described[name], name
        assert "only works on machines with" in described[name], name
    assert "libtorch-cuda-linalg" not in {o.name for o in render_ci_config(REPO_ROOT, config)}
