"""The developer overrides the driver names (recipe/megabuild/overrides.py) reach every build
script of both recipes: lint's check against the driver's own list, on meta.yaml as conda-build
reads it (selectors applied after Jinja too) and on recipe.yaml as rattler-build reads it."""
from __future__ import annotations

import json
from pathlib import Path

from common.driver import driver_module
from feedstock.before_build.checks.override_variables import check_override_variables
from feedstock.before_build.render.outputs import render_ci_config
from feedstock.before_build.render.variants import analyse_platform
from feedstock.layout import Platform, load_feedstock
from tests.support.feedstock_copy import copy_feedstock
from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.paths import REPO_ROOT

PYTORCH_FRONTEND = '          MEGABUILD_FRONTEND: ${{ env.get("MEGABUILD_FRONTEND", default="") }}\n'
CPU_CONFIG = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
OVERRIDES = driver_module(REPO_ROOT, "overrides").OVERRIDE_VARIABLES
BLOCK_LIST = ("      script_env:\n        {% for name in developer_overrides %}\n        - {{ name }}\n"
              "        {% endfor %}\n")


def _copy(tmp_path: Path, edit) -> Path:
    root = copy_feedstock(tmp_path / "feedstock")
    edit(root / "recipe")
    return root


def _findings(root: Path) -> list[str]:
    feedstock = load_feedstock(root)
    # linux-64 alone: every output builds there, and it keeps the test fast
    return check_override_variables(feedstock, [analyse_platform(feedstock, Platform("linux-64"))])


def _pytorch_script_env(meta: str, replacement: str) -> str:
    """meta.yaml with the pytorch output's script_env (its third output block list) replaced."""
    assert meta.count(BLOCK_LIST) == 3
    cut = meta.rindex(BLOCK_LIST)
    return meta[:cut] + replacement + meta[cut + len(BLOCK_LIST):]


def test_the_feedstock_passes_every_override_in_both_recipes(tmp_path):
    assert _findings(_copy(tmp_path, lambda recipe: None)) == []


def test_render_json_gives_each_building_output_its_script_env():
    outputs = {out.name: sorted(out.script_env) for out in render_ci_config(REPO_ROOT, CPU_CONFIG)}
    assert outputs["libtorch"] == outputs["pytorch"] == sorted(OVERRIDES)
    assert outputs["pytorch-cpu"] == []   # a metapackage runs no script


def test_a_one_line_list_is_a_selector_to_conda_build_and_lint_names_it(tmp_path):
    """`script_env: ['A', 'B']` ends in `[...]`: conda-build evaluates it as a selector (true),
    keeps `script_env:` alone, and the list is gone. The Jinja spelling renders to the same line."""
    def edit(recipe: Path) -> None:
        meta = (recipe / "meta.yaml").read_text()
        meta = _pytorch_script_env(meta, "      script_env: ['FEEDSTOCK_MAX_JOBS', 'CCACHE_DIR']\n")
        (recipe / "meta.yaml").write_text(meta)

    root = _copy(tmp_path, edit)
    shown = json.loads(run_feedstock_cli("render", CPU_CONFIG, "--json", root=root).stdout)
    assert {out["name"]: out["script_env"] for out in shown}["pytorch"] == []
    findings = _findings(root)
    assert findings == [f"recipe/meta.yaml: output 'pytorch': script_env lacks {name}, which the driver reads "
                        "(megabuild/overrides.py); pass it into the build (on linux-64, as conda-build reads it)"
                        for name in sorted(OVERRIDES)], findings


def test_the_jinja_list_on_one_line_is_dropped_too(tmp_path):
    def edit(recipe: Path) -> None:
        meta = (recipe / "meta.yaml").read_text()
        meta = meta.replace(BLOCK_LIST.replace("      ", "  ", 1).replace("\n        ", "\n    "),
                            "  script_env: {{ developer_overrides }}\n", 1)
        (recipe / "meta.yaml").write_text(meta)

    findings = _findings(_copy(tmp_path, edit))
    assert len(findings) == len(OVERRIDES), findings
    assert all(f.startswith("recipe/meta.yaml: the top level (libtorch-split): script_env lacks ") for f in findings)


def test_a_trailing_comment_keeps_the_one_line_list(tmp_path):
    """conda-build keeps a list followed by a comment without brackets: not a selector."""
    def edit(recipe: Path) -> None:
        meta = (recipe / "meta.yaml").read_text()
        meta = _pytorch_script_env(meta, "      script_env: {{ developer_overrides }}  # the driver's overrides\n")
        (recipe / "meta.yaml").write_text(meta)

    root = _copy(tmp_path, edit)
    assert _findings(root) == []
    assert sorted({o.name: o.script_env for o in render_ci_config(root, CPU_CONFIG)}["pytorch"]) == sorted(OVERRIDES)


def test_a_variable_a_build_script_forgets_is_named_with_its_output(tmp_path):
    def forget(recipe: Path) -> None:
        text = (recipe / "recipe.yaml").read_text()
        assert text.count(PYTORCH_FRONTEND) == 4
        cut = text.rindex(PYTORCH_FRONTEND)   # the pytorch output's, the last build script
        (recipe / "recipe.yaml").write_text(text[:cut] + text[cut + len(PYTORCH_FRONTEND):])

    assert _findings(_copy(tmp_path, forget)) == [
        "recipe/recipe.yaml: pytorch's build script lacks MEGABUILD_FRONTEND, which the driver reads "
        "(megabuild/overrides.py); pass it into the build"]


def test_an_install_step_that_forgets_one_is_named_too(tmp_path):
    """libtorch's step writes the activation scripts from the --cuda-arch list: it reads overrides."""
    def forget(recipe: Path) -> None:
        text = (recipe / "recipe.yaml").read_text()
        line = '          FEEDSTOCK_CUDA_ARCH_LIST: ${{ env.get("FEEDSTOCK_CUDA_ARCH_LIST", default="") }}\n'
        first = text.index(line)
        second = text.index(line, first + 1)   # the libtorch output's (the staging output's is first)
        (recipe / "recipe.yaml").write_text(text[:second] + text[second + len(line):])

    assert _findings(_copy(tmp_path, forget)) == [
        "recipe/recipe.yaml: libtorch's build script lacks FEEDSTOCK_CUDA_ARCH_LIST, which the driver reads "
        "(megabuild/overrides.py); pass it into the build"]


def test_an_unknown_name_and_a_secret_rendered_into_env(tmp_path):
    def edit(recipe: Path) -> None:
        meta = (recipe / "meta.yaml").read_text()
        meta = meta.replace('"CCACHE_DIR", ', '"CCACHE_DIR", "FEEDSTOCK_TYPO", ', 1)
        (recipe / "meta.yaml").write_text(meta)
        v1 = (recipe / "recipe.yaml").read_text()
        v1 = v1.replace("        secrets:\n          - FEEDSTOCK_COMPILE_CACHE_PASSWORD\n",
                        '          FEEDSTOCK_COMPILE_CACHE_PASSWORD: ${{ env.get("FEEDSTOCK_COMPILE_CACHE_PASSWORD", default="") }}\n', 1)
        (recipe / "recipe.yaml").write_text(v1)

    findings = _findings(_copy(tmp_path, edit))
    typo = [f for f in findings if "FEEDSTOCK_TYPO" in f]
    assert len(typo) == 4 and all("passes FEEDSTOCK_TYPO, which is no override the driver reads" in f for f in typo)
    assert {f.split(":")[1].strip() for f in typo} == {
        "the top level (libtorch-split)", "output 'libtorch'", "output 'libtorch-cuda-linalg'", "output 'pytorch'"}
    assert ("recipe/recipe.yaml: libtorch-split's build script renders FEEDSTOCK_COMPILE_CACHE_PASSWORD into its "
            "env; pass it under secrets: (by name, never written into the package)") in findings
    assert len(findings) == 5, findings
