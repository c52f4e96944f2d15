"""The developer overrides the driver names (recipe/megabuild/overrides.py) reach every build
script of both recipes: lint's check against the driver's own list."""
from __future__ import annotations

from pathlib import Path

from feedstock.before_build.checks.override_variables import check_override_variables
from feedstock.layout import load_feedstock
from tests.support.feedstock_copy import copy_feedstock

PYTORCH_FRONTEND = '          MEGABUILD_FRONTEND: ${{ env.get("MEGABUILD_FRONTEND", default="") }}\n'


def _findings(tmp_path: Path, edit) -> list[str]:
    root = copy_feedstock(tmp_path / "feedstock")
    edit(root / "recipe")
    return check_override_variables(load_feedstock(root))


def test_the_feedstock_passes_every_override_in_both_recipes(tmp_path):
    assert _findings(tmp_path, lambda recipe: None) == []


def test_a_variable_a_build_script_forgets_is_named_with_its_output(tmp_path):
    def forget(recipe: Path) -> None:
        text = (recipe / "recipe.yaml").read_text()
        assert text.count(PYTORCH_FRONTEND) == 2
        cut = text.rindex(PYTORCH_FRONTEND)   # the pytorch output's, the last build script
        (recipe / "recipe.yaml").write_text(text[:cut] + text[cut + len(PYTORCH_FRONTEND):])

    assert _findings(tmp_path, forget) == [
        "recipe/recipe.yaml: pytorch's build script lacks MEGABUILD_FRONTEND, which the driver reads "
        "(megabuild/overrides.py); pass it into the build"]


def test_meta_yaml_list_and_script_env_and_a_secret_rendered_into_env(tmp_path):
    def edit(recipe: Path) -> None:
        meta = (recipe / "meta.yaml").read_text()
        meta = meta.replace('"CCACHE_DIR", ', '"CCACHE_DIR", "FEEDSTOCK_TYPO", ', 1)
        meta = meta.replace("  script_env: {{ developer_overrides }}\n", "  script_env: [FEEDSTOCK_MAX_JOBS]\n", 1)
        (recipe / "meta.yaml").write_text(meta)
        v1 = (recipe / "recipe.yaml").read_text()
        v1 = v1.replace("        secrets:\n          - FEEDSTOCK_COMPILE_CACHE_PASSWORD\n",
                        '          FEEDSTOCK_COMPILE_CACHE_PASSWORD: ${{ env.get("FEEDSTOCK_COMPILE_CACHE_PASSWORD", default="") }}\n', 1)
        (recipe / "recipe.yaml").write_text(v1)

    findings = _findings(tmp_path, edit)
    assert ("recipe/meta.yaml developer_overrides passes FEEDSTOCK_TYPO, which is no override the driver "
            "reads (megabuild/overrides.py); add it there or drop it") in findings
    assert any(f.startswith("recipe/meta.yaml: script_env: [FEEDSTOCK_MAX_JOBS] is not {{ developer_overrides }}")
               for f in findings), findings
    assert ("recipe/recipe.yaml: libtorch-split's build script renders FEEDSTOCK_COMPILE_CACHE_PASSWORD into its "
            "env; pass it under secrets: (by name, never written into the package)") in findings
    assert len(findings) == 3, findings
