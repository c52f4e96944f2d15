"""The variant engine: for one platform, which variants the recipe builds and which keys it uses.

config files -> combined spec -> full matrix -> render each variant -> used keys per output,
top-level keys, and the variants not skipped. ci_jobs turns that into CI jobs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ...errors import FeedstockError
from ...layout import Feedstock
from ...platforms import Platform, environ_with
from ...text_input import UnreadableInput
from .matrix import Variant, explode, loop_keys
from .recipe_render import RecipeVariantRender, read_recipe, render_recipe_text
from .recipe_text import output_text, requirements_text, top_level_with_output
from .used_vars import drop_run_only, used_in_shell_script, used_in_text
from .variant_config import Spec, load_variant_spec


@dataclass
class OutputUse:
    """One output of one variant: its rendered dict and the variant keys it uses."""

    name: str
    index: int
    data: dict[str, Any]
    used: set[str]


@dataclass
class VariantUse:
    variant: Variant
    render: RecipeVariantRender
    outputs: list[OutputUse] = field(default_factory=list)   # the outputs not skipped


@dataclass
class PlatformMatrix:
    platform: Platform
    spec: Spec
    variants: list[Variant]                 # the full input matrix
    built: list[VariantUse]                 # variants with at least one output that builds
    top_level_used: set[str]                # keys the top level (plus first output) uses
    all_used: set[str]                      # keys any output or the top level uses

    @property
    def top_level_loop_keys(self) -> set[str]:
        keys = loop_keys(self.variants, subset=self.top_level_used)
        if "target_platform" in self.all_used:
            keys.add("target_platform")
        return keys


def smithy_environ(feedstock: Feedstock, platform: Platform, raw_recipe: str) -> dict[str, str]:
    """Environment conda-smithy exports while rendering (selectors may read it)."""
    import re

    env = {"BUILD_PLATFORM": feedstock.build_platform(platform).subdir}
    if re.search(r"^[^#]*compiler\((\"cuda\"|'cuda')\)", raw_recipe, re.M):
        env["CF_CUDA_ENABLED"] = "True"
    return env


def output_used_vars(raw: str, recipe_dir: Path, keys: tuple[str, ...], index: int,
                     output: Mapping[str, Any], render: RecipeVariantRender,
                     variant: Variant) -> set[str]:
    """Keys one output uses: selectors in its raw text, Jinja/requirements in its selected text,
    its build script; run-only requirements do not count (conda-build's rules)."""
    return _used_keys(keys, output_text(raw, index, None), output_text(raw, index, render.namespace),
                      output, output.get("script"), recipe_dir, variant)


def _top_level_used(raw: str, recipe_dir: Path, keys: tuple[str, ...], first: OutputUse,
                    render: RecipeVariantRender, variant: Variant) -> set[str]:
    """conda-build's top-level view: recipe minus outputs plus the first output, and its script."""
    # a recipe without outputs is built by build.sh; an output by its own script
    script = first.data.get("script") if first.index >= 0 else "build.sh"
    return _used_keys(keys, top_level_with_output(raw, first.index, None),
                      top_level_with_output(raw, first.index, render.namespace),
                      first.data, script, recipe_dir, variant)


def _used_keys(keys: tuple[str, ...], unselected: str, selected: str, data: Mapping[str, Any],
               script: Any, recipe_dir: Path, variant: Variant) -> set[str]:
    """The rules shared by an output and the top level: selectors in the raw text, Jinja and
    requirements in the selected text (minus run-only keys), the .sh build script, forced keys."""
    used = set(used_in_text(keys, unselected, selectors_only=True)) | set(used_in_text(keys, selected))
    in_requirements = set(used_in_text(keys, requirements_text(selected)))
    requirements = data.get("requirements") or {}
    if isinstance(requirements, list):
        requirements = {"run": requirements}
    used = (used - in_requirements) | drop_run_only(in_requirements, requirements, variant)
    if isinstance(script, str) and script.endswith(".sh"):
        used |= used_in_shell_script(keys, recipe_dir / script)
    build = data.get("build") or {}
    return _with_forced(used, variant, build, bool(build.get("noarch")))


def _with_forced(used: set[str], variant: Variant, build: Mapping[str, Any], noarch: bool) -> set[str]:
    if "target_platform" in variant and not noarch:
        used.add("target_platform")
    if "channel_targets" in variant:
        used.add("channel_targets")
    force_use = build.get("force_use_keys") or []
    force_ignore = build.get("force_ignore_keys") or []
    if force_use or force_ignore:
        used = (used - set(force_ignore)) | set(force_use)
    return used


def implicit_output(render: RecipeVariantRender) -> dict[str, Any]:
    """A recipe without ``outputs:`` builds one package: the top level itself."""
    top = render.top
    package = top.get("package") or {}
    return {"name": package.get("name"), "version": package.get("version"),
            "build": top.get("build") or {}, "requirements": top.get("requirements") or {},
            "test": top.get("test") or {}}


def used_by_outputs(raw: str, recipe_dir: Path, render: RecipeVariantRender,
                    variant: Variant) -> list[OutputUse]:
    """Every output this variant builds (not skipped) with the keys it uses."""
    keys = tuple(sorted(variant))
    if not render.outputs:
        data = implicit_output(render)
        whole = OutputUse(name=str(data["name"]), index=-1, data=data, used=set())
        whole.used = _top_level_used(raw, recipe_dir, keys, whole, render, variant)
        return [whole]
    uses = []
    for index, output in enumerate(render.outputs):
        if (output.get("build") or {}).get("skip"):
            continue
        used = output_used_vars(raw, recipe_dir, keys, index, output, render, variant)
        uses.append(OutputUse(name=str(output.get("name")), index=index, data=output, used=used))
    return uses


def analyse_platform(feedstock: Feedstock, platform: Platform) -> PlatformMatrix:
    """Expand and render the whole matrix of one platform."""
    raw = read_recipe(feedstock.recipe_dir)
    environ = smithy_environ(feedstock, platform, raw)
    build_platform = feedstock.build_platform(platform)
    try:
        spec = load_variant_spec(feedstock.variant_config_files(), platform, feedstock.root,
                                 build_platform, environ_with(environ))
    except UnreadableInput:
        raise
    except FeedstockError as err:
        reason = feedstock.why_targeted(platform)
        if reason:  # the pins are fine; the platform is the surprise
            raise FeedstockError(f"{err}; {reason}", exit_code=err.exit_code) from None
        raise
    variants = explode(spec)
    built: list[VariantUse] = []
    all_used: set[str] = set()
    top_used: set[str] | None = None
    for variant in variants:
        keys = tuple(sorted(variant))
        render = render_recipe_text(raw, platform, variant, feedstock.recipe_dir,
                                    environ=environ, build_platform=build_platform)
        if render.skipped:
            continue
        use = VariantUse(variant=variant, render=render,
                         outputs=used_by_outputs(raw, feedstock.recipe_dir, render, variant))
        for output in use.outputs:
            all_used |= output.used
        if not use.outputs:
            continue
        if top_used is None:
            top_used = _top_level_used(raw, feedstock.recipe_dir, keys, use.outputs[0], render, variant)
        built.append(use)
    return PlatformMatrix(platform=platform, spec=spec, variants=variants, built=built,
                          top_level_used=top_used or set(), all_used=all_used)
