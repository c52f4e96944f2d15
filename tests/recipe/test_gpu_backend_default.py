"""A config without the gpu_backend key: both recipes decide as the driver does
(megabuild/build_env.gpu_backend), from the CUDA or ROCm version, so the packages are the
CUDA or ROCm ones the build makes, not CPU packages with CUDA inside."""
from __future__ import annotations

import pytest

from tests.support.paths import REPO_ROOT

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")

from common.driver import driver_module  # noqa: E402
from feedstock.before_build.checks.parity import load_v1_recipe, rattler_outputs  # noqa: E402
from feedstock.before_build.render.outputs import job_variants, load_ci_config  # noqa: E402
from feedstock.before_build.render.recipe_render import read_recipe, render_recipe_text  # noqa: E402
from feedstock.before_build.render.variants import smithy_environ  # noqa: E402
from feedstock.layout import Platform, load_feedstock  # noqa: E402

CONFIGS = {"cuda": "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_version12.9gpu_backendcudarocm_versionNone",
           "rocm": "linux_64_blas_implgenericc_stdlib_version2.28cuda_compiler_versionNonegpu_backendrocmrocm_version7.2"}


def _without_the_key(text: str, backend: str) -> str:
    assert f"gpu_backend:\n- {backend}\n" in text and "- - gpu_backend\n  - cuda_compiler_version\n" in text
    return text.replace(f"gpu_backend:\n- {backend}\n", "").replace(
        "- - gpu_backend\n  - cuda_compiler_version\n", "- - cuda_compiler_version\n")


@pytest.mark.parametrize("backend", sorted(CONFIGS))
def test_both_recipes_fall_back_as_the_driver_does(backend, tmp_path):
    variant_keys = {"cuda_compiler_version": "12.9" if backend == "cuda" else "None",
                    "rocm_version": "7.2" if backend == "rocm" else "None"}
    assert driver_module(REPO_ROOT, "build_env").gpu_backend(variant_keys) == backend
    # recipe.yaml: rattler-build reads the job file alone (--ignore-recipe-variants)
    original = REPO_ROOT / ".ci_support" / f"{CONFIGS[backend]}.yaml"
    bare = tmp_path / f"{CONFIGS[backend]}.yaml"
    bare.write_text(_without_the_key(original.read_text(), backend))
    recipe = load_v1_recipe(REPO_ROOT / "recipe" / "recipe.yaml")
    expected = sorted((o.name, o.build_string) for o in rattler_outputs(recipe, original))
    assert sorted((o.name, o.build_string) for o in rattler_outputs(recipe, bare)) == expected
    assert f"pytorch-{'gpu' if backend == 'cuda' else 'rocm'}" in {name for name, _ in expected}
    # meta.yaml: conda-build fills a key the job lacks from the recipe's conda_build_config.yaml;
    # without it there too, the template's own default decides (one variant rendered alone)
    feedstock = load_feedstock(REPO_ROOT)
    platform = Platform("linux-64")
    [variant, *_] = job_variants(feedstock, load_ci_config(original), platform)
    raw = read_recipe(feedstock.recipe_dir)
    environ = smithy_environ(feedstock, platform, raw)
    with_key = render_recipe_text(raw, platform, variant, feedstock.recipe_dir, environ=environ)
    without = render_recipe_text(raw, platform, {k: v for k, v in variant.items() if k != "gpu_backend"},
                                 feedstock.recipe_dir, environ=environ)
    strings = [[(o.get("name"), str((o.get("build") or {}).get("string"))) for o in render.outputs]
               for render in (with_key, without)]
    assert strings[0] == strings[1] and any(backend in s for _, s in strings[0]), strings
