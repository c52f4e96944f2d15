"""Render meta.yaml for one variant: selectors, Jinja2 (conda-build's functions), selectors
again on the rendered text (as conda-build applies them), then YAML.

The result is plain data: the top-level metadata and its outputs, as dicts. Finding used
variables and computing build strings happen elsewhere (used_vars, render).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import jinja2

from ...errors import FeedstockError
from ...platforms import Platform, environ_with, selector_namespace
from common.suggest import did_you_mean
from ...text_input import load_yaml, read_text
from .jinja_functions import make_functions
from .selectors import select_lines

# conda-build fills PKG_HASH in later; until then the build string carries this placeholder
HASH_PLACEHOLDER = "1234567"
# the top-level sections conda-build knows (its metadata FIELDS); it refuses any other
RECIPE_SECTIONS = frozenset({"package", "source", "build", "requirements", "app", "outputs", "test",
                             "about", "extra"})


@dataclass
class RecipeVariantRender:
    """meta.yaml rendered for one variant."""

    top: dict[str, Any]
    outputs: list[dict[str, Any]]
    namespace: dict[str, Any] = field(repr=False)

    @property
    def skipped(self) -> bool:
        return bool((self.top.get("build") or {}).get("skip"))


@lru_cache(maxsize=8)
def _jinja_env() -> jinja2.Environment:
    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


@lru_cache(maxsize=64)
def _template(text: str) -> jinja2.Template:
    return _jinja_env().from_string(text)


def _python_short(variant: Mapping[str, Any]) -> tuple[str, str]:
    python = str(variant.get("python", "3.12")).split(" ")[0]
    major, minor = (python.split(".") + ["0"])[:2]
    return f"{major}.{minor}", f"{major}{minor}"


def jinja_context(platform: Platform, variant: Mapping[str, Any], recipe_dir: Path,
                  subpackages: Mapping[str, tuple[str, str]] | None,
                  environ: Mapping[str, str] | None, build_platform: Platform | None) -> dict[str, Any]:
    py_ver, conda_py = _python_short(variant)
    numpy = str(variant.get("numpy", "1.26")).split(" ")[0]
    context: dict[str, Any] = dict(variant)
    context.update(
        environ=environ_with(environ),
        os=os,
        target_platform=str(variant.get("target_platform", platform.subdir)),
        build_platform=(build_platform or platform).subdir,
        PY_VER=py_ver,
        CONDA_PY=conda_py,
        NPY_VER=".".join(numpy.split(".")[:2]),
        CONDA_NPY="".join(numpy.split(".")[:2]),
        PKG_HASH=HASH_PLACEHOLDER,
        RECIPE_DIR=str(recipe_dir),
    )
    context.update(make_functions(platform, variant, recipe_dir, subpackages))
    return context


def render_recipe_text(raw: str, platform: Platform, variant: Mapping[str, Any], recipe_dir: Path,
                       subpackages: Mapping[str, tuple[str, str]] | None = None,
                       environ: Mapping[str, str] | None = None,
                       build_platform: Platform | None = None) -> RecipeVariantRender:
    """Selectors, Jinja2 and YAML for one variant; errors are one line naming meta.yaml."""
    namespace = selector_namespace(platform, variant, build_platform, environ_with(environ))
    selected = select_lines(raw, namespace, "recipe/meta.yaml")
    context = jinja_context(platform, variant, recipe_dir, subpackages, environ, build_platform)
    try:
        text = _template(selected).render(**context)
    except jinja2.UndefinedError as err:
        raise FeedstockError(f"recipe/meta.yaml: {err.message} on {platform.subdir}; "
                             "define it in conda_build_config.yaml or the pinning file")
    except jinja2.TemplateSyntaxError as err:
        raise FeedstockError(f"recipe/meta.yaml:{err.lineno}: Jinja2 syntax error: {err.message}")
    except FeedstockError:
        raise
    except Exception as err:  # recipe code raised: report it as one line
        raise FeedstockError(f"recipe/meta.yaml: rendering failed on {platform.subdir} "
                             f"({type(err).__name__}: {err})")
    # conda-build selects lines again after Jinja (MetaData.parse): a rendered line that ends in
    # `[...]`, with or without `#`, is a selector there too (`key: {{ a_list }}` keeps only `key:`)
    text = select_lines(text, namespace, f"recipe/meta.yaml (rendered on {platform.subdir})")
    # a recipe may use anchors and aliases (bounded once expanded); the other inputs may not
    top = load_yaml(text, "recipe/meta.yaml (rendered)", context=f" on {platform.subdir}", aliases=True) or {}
    if not isinstance(top, dict) or not top:
        raise FeedstockError(f"recipe/meta.yaml renders to no recipe on {platform.subdir}; it needs "
                             "package: and outputs: (is the file empty?)")
    unknown = sorted(str(key) for key in top if key not in RECIPE_SECTIONS)
    if unknown:
        hint = did_you_mean(unknown[0], sorted(RECIPE_SECTIONS)) or f"known: {', '.join(sorted(RECIPE_SECTIONS))}"
        raise FeedstockError(f"recipe/meta.yaml: unknown section '{unknown[0]}' ({hint}); conda-build "
                             "refuses sections it does not know")
    listed = top.get("outputs") or []
    if not isinstance(listed, list) or not all(isinstance(o, dict) for o in listed):
        raise FeedstockError(f"recipe/meta.yaml: outputs must be a list of mappings on {platform.subdir}; "
                             "fix the recipe")
    outputs = list(listed)
    _check_build_numbers(top, outputs, platform)
    return RecipeVariantRender(top=top, outputs=outputs, namespace=namespace)


def _check_build_numbers(top: dict, outputs: list[dict], platform: Platform) -> None:
    """Build numbers are non-negative integers (later steps add to them and sort by them)."""
    owners = [("the top level", top)] + [(f"output '{o.get('name')}'", o) for o in outputs]
    for owner, data in owners:
        build = data.get("build")
        number = build.get("number") if isinstance(build, dict) else None
        valid = ((isinstance(number, int) and not isinstance(number, bool) and number >= 0)
                 or (isinstance(number, str) and number.strip().isdigit()))
        if number is not None and not valid:
            raise FeedstockError(f"recipe/meta.yaml: build/number of {owner} is {number!r} on "
                                 f"{platform.subdir}; it must be a non-negative integer")


def read_recipe(recipe_dir: Path) -> str:
    path = recipe_dir / "meta.yaml"
    try:
        return read_text(path, "recipe/meta.yaml")
    except FileNotFoundError:
        raise FeedstockError(f"{path} not found; run from the feedstock root (the folder with recipe/)") from None
