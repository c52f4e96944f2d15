"""The developer overrides reach the build in both recipes: every variable of the driver's list
(recipe/megabuild/overrides.py, asked from the driver itself) is passed into each build script,
and no other name pretends to be one. A variable a recipe forgets is silently empty in that
build: `--jobs` or `--cuda-arch` would do nothing there."""
from __future__ import annotations

import re
from typing import Any, Iterator

from ...layout import Feedstock
from ...text_input import load_yaml, read_text
from ..render.outputs import script_env_names
from ..render.recipe_render import RecipeVariantRender
from ..render.variants import PlatformMatrix
from .driver_facts import configuring_steps, load_driver_module

DRIVER_LIST = "megabuild/overrides.py"


def check_override_variables(feedstock: Feedstock, matrices: list[PlatformMatrix]) -> list[str]:
    """Findings for both recipes; `matrices`: meta.yaml rendered per platform (lint's analysis)."""
    driver = load_driver_module(feedstock.recipe_dir, "overrides")
    wanted = set(driver.OVERRIDE_VARIABLES)
    findings = _meta_findings(matrices, wanted)
    v1 = feedstock.recipe_dir / "recipe.yaml"
    if v1.is_file():
        findings += _v1_findings(read_text(v1, "recipe/recipe.yaml"), wanted, set(driver.SECRET_VARIABLES),
                                 configuring_steps(feedstock.recipe_dir))
    return findings


def _differences(label: str, given: set[str], wanted: set[str]) -> list[str]:
    found = [f"{label} lacks {name}, which the driver reads ({DRIVER_LIST}); pass it into the build"
             for name in sorted(wanted - given)]
    return found + [f"{label} passes {name}, which is no override the driver reads ({DRIVER_LIST}); "
                    "add it there or drop it" for name in sorted(given - wanted)]


def meta_build_scripts(render: RecipeVariantRender) -> Iterator[tuple[str, list[str]]]:
    """(who, script_env names) of every part of one rendered variant that runs a build script:
    the top level (recipe/build.sh, the split step) and each output with a `script:`. The names
    are what conda-build reads, selectors applied after Jinja too (recipe_render)."""
    yield "the top level (libtorch-split)", script_env_names(render.top.get("build"))
    for output in render.outputs:
        if output.get("script"):
            yield f"output '{output.get('name')}'", script_env_names(output.get("build"))


def _meta_findings(matrices: list[PlatformMatrix], wanted: set[str]) -> list[str]:
    """Every build script conda-build runs gets every override: a `script_env` spelled so that
    conda-build drops it (`script_env: {{ a_list }}` ends in `[...]`, a selector) is named here."""
    platforms: dict[tuple[str, str], set[str]] = {}
    for matrix in matrices:
        for use in matrix.built:
            for who, names in meta_build_scripts(use.render):
                for line in _differences(f"recipe/meta.yaml: {who}: script_env", set(names), wanted):
                    platforms.setdefault((who, line), set()).add(matrix.platform.subdir)
    return [f"{line} (on {', '.join(sorted(subdirs))}, as conda-build reads it)"
            for (_, line), subdirs in sorted(platforms.items())]


def _build_scripts(recipe: Any) -> Iterator[tuple[str, dict]]:
    """(output name, its build script mapping) of every output and staging output."""
    for output in (recipe or {}).get("outputs") or []:
        if not isinstance(output, dict):
            continue
        head = output.get("staging") or output.get("package") or {}
        script = (output.get("build") or {}).get("script")
        if isinstance(head, dict) and isinstance(script, dict):
            yield str(head.get("name")), script


def v1_passthrough(recipe: Any) -> dict[str, list[str]]:
    """Output (or staging) name -> the variables its build script takes from the environment, as
    rattler-build reads recipe.yaml: an `env:` entry `NAME: ${{ env.get("NAME", ...) }}`, or
    `NAME` under `secrets:`. (A rendered recipe drops env entries whose value is empty, so the
    names come from the recipe as written.)"""
    passed: dict[str, list[str]] = {}
    for name, script in _build_scripts(recipe):
        env = script.get("env") if isinstance(script.get("env"), dict) else {}
        names = [str(key) for key, value in env.items()
                 if re.search(rf"env\.get\(\s*[\"']{re.escape(str(key))}[\"']", str(value))]
        passed[name] = sorted(set(names) | {str(key) for key in script.get("secrets") or []})
    return passed


def _v1_findings(text: str, wanted: set[str], secrets: set[str], configuring: tuple[str, ...]) -> list[str]:
    """Every output that runs a build script passes every override (the install steps read some
    too: libtorch's activation scripts carry the --cuda-arch list); the driver's
    CONFIGURING_STEPS must each have one."""
    findings: list[str] = []
    scripts = list(_build_scripts(load_yaml(text, "recipe/recipe.yaml", strings=True)))
    for name, script in scripts:
        env = script.get("env") if isinstance(script.get("env"), dict) else {}
        passed = {key for key, value in env.items()
                  if re.search(rf"env\.get\(\s*[\"']{re.escape(str(key))}[\"']", str(value))}
        given = passed | {str(key) for key in script.get("secrets") or []}
        findings += _differences(f"recipe/recipe.yaml: {name}'s build script", given, wanted)
        findings += [f"recipe/recipe.yaml: {name}'s build script renders {key} into its env; pass it "
                     "under secrets: (by name, never written into the package)" for key in sorted(passed & secrets)]
    missing = [step for step in configuring if step not in {name for name, _ in scripts}]
    return findings + [f"recipe/recipe.yaml has no output {step} with a build script; the driver runs that step "
                       "(megabuild/steps.py)" for step in missing]
