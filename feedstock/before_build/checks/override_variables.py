"""The developer overrides reach the build in both recipes: every variable of the driver's list
(recipe/megabuild/overrides.py, asked from the driver itself) is passed into each build script,
and no other name pretends to be one. A variable a recipe forgets is silently empty in that
build: `--jobs` or `--cuda-arch` would do nothing there."""
from __future__ import annotations

import re
from typing import Any, Iterator

from ...layout import Feedstock
from ...text_input import load_yaml, read_text
from .driver_facts import configuring_steps, load_driver_module

DRIVER_LIST = "megabuild/overrides.py"
_META_LIST = re.compile(r"\{%-?\s*set\s+developer_overrides\s*=\s*\[([^\]]*)\]\s*-?%\}")
_META_USE = re.compile(r"^\s*script_env:\s*(.*)$", re.MULTILINE)


def check_override_variables(feedstock: Feedstock) -> list[str]:
    driver = load_driver_module(feedstock.recipe_dir, "overrides")
    wanted = set(driver.OVERRIDE_VARIABLES)
    findings = _meta_findings(read_text(feedstock.meta_yaml, "recipe/meta.yaml"), wanted)
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


def _meta_findings(text: str, wanted: set[str]) -> list[str]:
    match = _META_LIST.search(text)
    if match is None:
        return ["recipe/meta.yaml has no `{% set developer_overrides = [...] %}` list; every output "
                f"that builds passes it as script_env ({DRIVER_LIST})"]
    given = set(re.findall(r"[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']", match.group(1)))
    findings = _differences("recipe/meta.yaml developer_overrides", given, wanted)
    for line_text in _META_USE.findall(text):
        if line_text.strip() != "{{ developer_overrides }}":
            findings.append(f"recipe/meta.yaml: script_env: {line_text.strip()} is not {{{{ developer_overrides }}}}; "
                            "give every output the one list")
    return findings


def _build_scripts(recipe: Any) -> Iterator[tuple[str, dict]]:
    """(output name, its build script mapping) of every output and staging output."""
    for output in (recipe or {}).get("outputs") or []:
        if not isinstance(output, dict):
            continue
        head = output.get("staging") or output.get("package") or {}
        script = (output.get("build") or {}).get("script")
        if isinstance(head, dict) and isinstance(script, dict):
            yield str(head.get("name")), script


def _v1_findings(text: str, wanted: set[str], secrets: set[str], configuring: tuple[str, ...]) -> list[str]:
    """The outputs whose step configures and compiles (the driver's CONFIGURING_STEPS) pass
    every override; the install-only steps read none."""
    findings: list[str] = []
    scripts = list(_build_scripts(load_yaml(text, "recipe/recipe.yaml", strings=True)))
    for name, script in scripts:
        if name not in configuring:
            continue
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
