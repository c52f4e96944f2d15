"""The recipes declare the dependents a channel carries as downstream tests of pytorch, and
parity compares those sections."""
from __future__ import annotations

import pytest

from feedstock.dependents_catalog import load_catalog
from feedstock.before_build.render.outputs import render_ci_config
from tests.support.paths import CPU_GENERIC_JOB, REPO_ROOT

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")

from feedstock.before_build.checks.parity import parity  # noqa: E402



def test_pytorch_declares_the_catalogs_channel_dependents(repo_root):
    wanted = [d.name for d in load_catalog(repo_root / "recipe" / "dependents.yaml") if d.channel]
    assert wanted == ["torch-scatter", "torch-cluster", "einops", "opt-einsum"]
    pytorch = [o for o in render_ci_config(repo_root, CPU_GENERIC_JOB) if o.name == "pytorch"]
    assert pytorch and all(o.tests.get("downstreams") == wanted for o in pytorch)
    recipe = (repo_root / "recipe" / "recipe.yaml").read_text()
    assert [line.split(":", 1)[1].strip() for line in recipe.splitlines()
            if line.strip().startswith("- downstream:")] == wanted


def test_parity_sees_a_downstream_test_in_one_recipe_only(feedstock_copy):
    recipe = feedstock_copy / "recipe" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("      - downstream: einops\n", ""))
    lines = parity(feedstock_copy, [CPU_GENERIC_JOB]).differences
    assert lines and all("pytorch cpu_generic_py3" in line for line in lines), lines
    assert any("downstream tests: 'einops' only in meta.yaml" in line for line in lines), lines
