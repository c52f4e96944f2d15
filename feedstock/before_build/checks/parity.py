"""``parity``: recipe/meta.yaml and recipe/recipe.yaml must describe the same packages.

For every ``.ci_support`` job both recipes are rendered — meta.yaml with our renderer
(``feedstock.before_build.render``), recipe.yaml with rattler-build's own (``rattler_build.Stage0Recipe``,
from py-rattler-build) reading the same job file — and each output is brought to one
comparable form (``Comparable``):

- name, version, build number;
- the build string with its hash replaced by ``h<hash>`` (the two tools hash differently);
- requirements per section: bare build/host names take the variant's pin, as both tools do
  at build time; ``name 1.2`` (conda's exact match) is written ``name ==1.2``; hashes in
  exact pins are masked; ``pin_subpackage`` is spelled out;
- run_exports, whether the output is de-prioritised (track_features / down_prioritize_variant);
- tests: commands in order, imports, test requirements, test files, downstream dependents
  (meta.yaml `downstreams:`, recipe.yaml `- downstream:` entries).
- what the build script takes from the environment: meta.yaml's `script_env`, as conda-build
  reads it; recipe.yaml's `env.get(...)` entries and `secrets:`.

Every difference is one line ``<job>: <output>: <what> ...``.

A job compares only what meta.yaml builds: a platform or variant meta.yaml skips has no job,
so a recipe.yaml that still builds there would pass unseen. ``platform_skips`` closes that:
on every platform conda knows (``feedstock.platforms.KNOWN_SUBDIRS``), job or not, it renders
both recipes for each variant of the platform's full matrix (one variant at a time, the same
values on both sides) and compares which outputs each builds. One line per difference:
``<output> on <platform>: meta.yaml skips it, recipe.yaml builds it`` (or the reverse), or, when
both build it but in different variants, the counts and the first variant that differs. A
platform the variant config gives no values (win-64 here: pinning.yaml defines no compilers
for it) is rendered once, with the first variant of the feedstock's first platform under the
platform's own defaults: the skip selectors that name the platform still decide.
"""
from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..ci.rerender import protected_files
from ...errors import FeedstockError
from ...layout import Feedstock, load_feedstock
from ...platforms import KNOWN_SUBDIRS, Platform, environ_with
from ..render.matrix import Variant, explode, loop_keys
from ..render.outputs import load_ci_config, pin_from_variant, render_job
from ..render.recipe_render import read_recipe, render_recipe_text
from ..render.variant_config import internal_defaults, load_variant_spec
from ..render.variants import smithy_environ, used_by_outputs
from .override_variables import v1_passthrough
from .render_cache import RenderCache

SECTIONS = ("build", "host", "run", "run_constrained")
_HASH = re.compile(r"(?<![0-9a-z])h[0-9a-f]{7}(?=_|$|\s)")
_PLAIN_VERSION = re.compile(r"[0-9][\w.+!]*")
_JINJA_VAR = re.compile(r"\$\{\{\s*([A-Za-z_]\w*)\s*\}\}")


@dataclass
class Comparable:
    """One output in the form both recipes are compared in."""

    name: str
    version: str
    build_number: int
    build_string: str
    requirements: dict[str, list[str]] = field(default_factory=dict)
    run_exports: list[str] = field(default_factory=list)
    deprioritised: bool = False
    commands: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    test_requires: list[str] = field(default_factory=list)
    test_files: list[str] = field(default_factory=list)
    downstreams: list[str] = field(default_factory=list)
    # the variables the build script takes from the environment (meta.yaml script_env;
    # recipe.yaml env.get(...) entries and secrets)
    script_env: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.build_string


@dataclass
class ParityReport:
    configs: int = 0
    outputs: int = 0
    equal: int = 0
    differences: list[str] = field(default_factory=list)
    seconds_ours: float = 0.0
    seconds_rattler: float = 0.0
    platforms: int = 0                  # platforms whose skips were compared (0: not checked)
    skip_differences: int = 0
    cached: int = 0                     # rattler-build renders taken from the render cache
    rendered: int = 0                   # and done in this run

    @property
    def summary(self) -> str:
        """Both counts, so a failing run never reads as a pass."""
        text = (f"parity: {self.configs} configs, {self.outputs} outputs: {self.equal} equal, "
                f"{self.outputs - self.equal} differ")
        if self.platforms:
            text += f"; skips on {self.platforms} platforms: {self.skip_differences} differ"
        return text


def mask_hash(text: str) -> str:
    return _HASH.sub("h<hash>", text)


def normalize_spec(spec: str) -> str:
    """One spelling per match spec: whitespace collapsed, a bare version made ``==``, hashes
    in build strings masked."""
    parts = str(spec).split()
    if len(parts) >= 2 and _PLAIN_VERSION.fullmatch(parts[1]) and "*" not in parts[1]:
        parts[1] = "==" + parts[1]
    return mask_hash(" ".join(parts))


def _specs(items: Iterable[Any]) -> list[str]:
    return sorted(normalize_spec(str(i)) for i in items)


# --- meta.yaml (our renderer) ------------------------------------------------------------------

def _split_test_commands(tests: dict[str, Any]) -> list[str]:
    return [str(c) for c in (tests.get("commands") or [])]


def from_meta(output) -> Comparable:
    """A ``feedstock.before_build.render.RenderedOutput`` as a Comparable."""
    tests = output.tests or {}
    return Comparable(
        name=output.name, version=output.version, build_number=output.build_number,
        build_string=mask_hash(output.build_string),
        requirements={s: _specs(output.requirements.get(s) or []) for s in SECTIONS
                      if output.requirements.get(s)},
        run_exports=_specs(output.run_exports if isinstance(output.run_exports, list)
                           else output.run_exports.get("weak", [])),
        deprioritised=bool(output.track_features),
        commands=_split_test_commands(tests),
        imports=sorted(str(i) for i in tests.get("imports") or []),
        test_requires=_specs(tests.get("requires") or []),
        test_files=sorted(str(f) for f in tests.get("files") or []),
        downstreams=sorted(str(d) for d in tests.get("downstreams") or []),
        script_env=sorted(set(output.script_env)),
    )


def meta_outputs(feedstock: Feedstock, config: Path) -> list[Comparable]:
    return [from_meta(o) for o in render_job(feedstock, config.stem, load_ci_config(config))]


# --- recipe.yaml (rattler-build's renderer) ---------------------------------------------------

def _upper_bound(version: str, pattern: str) -> str:
    """``2.13.0`` with ``x.x`` -> ``2.14.0a0`` (conda-build's max_pin arithmetic)."""
    parts = version.split(".")[:len(pattern.split("."))]
    parts[-1] = str(int(re.match(r"\d+", parts[-1]).group(0)) + 1)
    return ".".join(parts) + ".0a0"


def _pin(pin: dict[str, Any], pins: dict[str, Any], versions: dict[str, str]) -> str:
    """``pin_subpackage`` spelled out: exact pins carry the sibling's build string (rattler-build
    records it per variant), version ranges need only the version."""
    name = pin["name"]
    if pin.get("exact"):
        info = pins.get(name)
        if info is None:
            raise FeedstockError(f"recipe.yaml pins subpackage {name} exactly, which the render did not produce")
        return f"{name} =={info.version} {info.build_string}"
    version = versions.get(name)
    if version is None:
        raise FeedstockError(f"recipe.yaml pins subpackage {name}, which the render did not produce")
    upper = pin.get("upper_bound")
    return f"{name} >={version},<{_upper_bound(version, upper)}" if upper else f"{name} >={version}"


def _requirement(item: Any, pins: dict[str, Any], versions: dict[str, str]) -> str:
    if isinstance(item, dict) and "pin_subpackage" in item:
        return _pin(item["pin_subpackage"], pins, versions)
    if isinstance(item, dict):
        raise FeedstockError(f"recipe.yaml: a requirement parity cannot read: {item}")
    return str(item)


def _substitute(line: str, context: dict[str, Any]) -> str:
    """Test scripts keep ``${{ var }}`` until the test runs; fill in the variant and context."""
    return _JINJA_VAR.sub(lambda m: str(context.get(m.group(1), m.group(0))), line)


def from_rattler(rendered, versions: dict[str, str], passthrough: dict[str, list[str]] | None = None) -> Comparable:
    """A ``rattler_build.render.RenderedVariant`` as a Comparable (``versions``: every output's
    version, for pins; ``passthrough``: what each output's script takes from the environment,
    ``override_variables.v1_passthrough``)."""
    data = rendered.recipe.to_dict()
    variant = {k: str(v) for k, v in rendered.variant.items()}
    pins = rendered.pin_subpackages
    # test scripts are rendered when the test runs, with the variant and the recipe's context
    context = {**variant, **(data.get("context") or {})}
    reqs = data.get("requirements") or {}
    requirements: dict[str, list[str]] = {}
    for section, key in zip(SECTIONS, ("build", "host", "run", "run_constraints")):
        items = [_requirement(i, pins, versions) for i in reqs.get(key) or []]
        if section in ("build", "host"):
            items = pin_from_variant(items, variant)
        if items:
            requirements[section] = _specs(items)
    exports = reqs.get("run_exports") or {}
    if isinstance(exports, list):
        exports = {"weak": exports}
    run_exports = [("" if kind == "weak" else f"{kind}: ") + _requirement(i, pins, versions)
                   for kind, items in exports.items() for i in items or []]
    commands: list[str] = []
    imports: list[str] = []
    requires: list[str] = []
    files: list[str] = []
    downstreams: list[str] = []
    for test in data.get("tests") or []:
        if "downstream" in test:
            downstreams.append(str(test["downstream"]))
            continue
        if "python" in test:
            imports += [str(i) for i in test["python"].get("imports") or []]
            if test["python"].get("pip_check"):
                commands.append("pip check")
            continue
        script = test.get("script") or []
        if isinstance(script, dict):
            script = script.get("content") or []
        commands += [_substitute(str(line), context) for line in
                     (script if isinstance(script, list) else str(script).splitlines())]
        requires += [_requirement(i, pins, versions) for i in (test.get("requirements") or {}).get("run") or []]
        files += [str(f) for f in (test.get("files") or {}).get("recipe") or []]
    build = data.get("build") or {}
    package = data.get("package") or {}
    return Comparable(
        name=str(package.get("name")), version=str(package.get("version")),
        build_number=int(build.get("number") or 0),
        build_string=mask_hash(str(build.get("string") or "")),
        requirements=requirements, run_exports=_specs(run_exports),
        deprioritised=int((build.get("variant") or {}).get("down_prioritize_variant") or 0) > 0,
        commands=commands, imports=sorted(imports), test_requires=_specs(requires),
        test_files=sorted(files), downstreams=sorted(downstreams),
        script_env=list((passthrough or {}).get(str(package.get("name")), [])))


def load_v1_recipe(path: Path):
    """The parsed recipe.yaml; a YAML or schema error is one FeedstockError line."""
    try:
        from rattler_build import Stage0Recipe
    except ImportError:
        raise FeedstockError("py-rattler-build is not installed; install requirements-dev.txt "
                             "(pip install -r requirements-dev.txt)") from None
    if not path.is_file():
        raise FeedstockError(f"{path} does not exist; the v1 recipe is needed for parity")
    try:
        return Stage0Recipe.from_file(path)
    except Exception as err:  # rattler-build raises several error types for a bad recipe
        raise FeedstockError(f"{path}: cannot parse: {_one_line(err)}") from None


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text[:400]


def rattler_outputs(recipe, config: Path, cache: RenderCache | None = None) -> list[Comparable]:
    """recipe.yaml's outputs for one job, as rattler-build renders them (kept in `cache`)."""
    if cache is None:
        return _rattler_outputs(recipe, config)
    return cache.get(["job", config.name, config.read_text(encoding="utf-8", errors="replace")],
                     lambda: [dataclasses.asdict(out) for out in _rattler_outputs(recipe, config)],
                     lambda rows: [Comparable(**row) for row in rows])


def _rattler_outputs(recipe, config: Path) -> list[Comparable]:
    from rattler_build import VariantConfig
    from rattler_build.render import RenderConfig
    from rattler_build.tool_config import PlatformConfig

    platform = str(load_ci_config(config)["target_platform"][0])
    try:
        variants = recipe.render(VariantConfig.from_file(config),
                                 RenderConfig(platform=PlatformConfig(target_platform=platform)))
    except Exception as err:
        raise FeedstockError(f"recipe.yaml does not render for {config.stem}: {_one_line(err)}") from None
    versions = {str(v.recipe.package.name): str(v.recipe.package.version) for v in variants}
    passthrough = v1_passthrough(recipe.to_dict())
    seen: dict[tuple[str, str], Comparable] = {}
    for rendered in variants:
        out = from_rattler(rendered, versions, passthrough)
        seen.setdefault(out.key, out)
    return list(seen.values())


# --- comparison -------------------------------------------------------------------------------

def _list_diff(label: str, ours: list[str], theirs: list[str]) -> list[str]:
    lines = []
    for item in [i for i in ours if i not in theirs]:
        lines.append(f"{label}: {item!r} only in meta.yaml")
    for item in [i for i in theirs if i not in ours]:
        lines.append(f"{label}: {item!r} only in recipe.yaml")
    return lines


def compare_output(ours: Comparable, theirs: Comparable) -> list[str]:
    """Differences between one output of meta.yaml (ours) and of recipe.yaml (theirs)."""
    lines: list[str] = []
    for attr in ("version", "build_number"):
        if getattr(ours, attr) != getattr(theirs, attr):
            lines.append(f"{attr}: meta.yaml {getattr(ours, attr)!r}, recipe.yaml {getattr(theirs, attr)!r}")
    for section in SECTIONS:
        lines += _list_diff(f"requirements/{section}", ours.requirements.get(section, []),
                            theirs.requirements.get(section, []))
    lines += _list_diff("run_exports", ours.run_exports, theirs.run_exports)
    if ours.deprioritised != theirs.deprioritised:
        lines.append(f"de-prioritised (track_features): meta.yaml {ours.deprioritised}, "
                     f"recipe.yaml {theirs.deprioritised}")
    lines += _list_diff("test imports", ours.imports, theirs.imports)
    lines += _list_diff("test requires", ours.test_requires, theirs.test_requires)
    lines += _list_diff("test files", ours.test_files, theirs.test_files)
    lines += _list_diff("downstream tests", ours.downstreams, theirs.downstreams)
    lines += _list_diff("script env (from the environment)", ours.script_env, theirs.script_env)
    if ours.commands != theirs.commands:
        extra = _list_diff("test command", ours.commands, theirs.commands)
        lines += extra or ["test commands: same commands in a different order"]
    return lines


def compare_config(name: str, ours: list[Comparable], theirs: list[Comparable]) -> tuple[list[str], int, int]:
    """(difference lines, outputs compared, outputs equal) for one job."""
    lines: list[str] = []
    by_key = {o.key: o for o in theirs}
    equal = 0
    for out in ours:
        other = by_key.pop(out.key, None)
        if other is None:
            lines.append(f"{name}: {out.name} {out.build_string}: only in meta.yaml")
            continue
        diffs = compare_output(out, other)
        lines += [f"{name}: {out.name} {out.build_string}: {d}" for d in diffs]
        equal += not diffs
    for out in by_key.values():
        lines.append(f"{name}: {out.name} {out.build_string}: only in recipe.yaml")
    return lines, len(ours) + len(by_key), equal


# --- skip: which outputs each recipe builds on every platform ------------------------------------

@dataclass
class _PlatformBuilds:
    """What one recipe builds on one platform: output name -> indexes of the variants that build
    it, or the one-line error that stopped the render."""

    outputs: dict[str, set[int]] = field(default_factory=dict)
    error: str = ""


def platform_variants(feedstock: Feedstock, platform: Platform, fallback: Variant | None) -> list[Variant]:
    """The platform's full variant matrix; ``fallback`` under the platform's own defaults where the
    variant config has no values for it (its zip groups do not load there)."""
    raw = read_recipe(feedstock.recipe_dir)
    environ = environ_with(smithy_environ(feedstock, platform, raw))
    try:
        return explode(load_variant_spec(feedstock.variant_config_files(), platform, feedstock.root,
                                         feedstock.build_platform(platform), environ))
    except FeedstockError:
        if fallback is None:
            raise
        return [{**fallback, **internal_defaults(platform)}]


def _meta_builds(feedstock: Feedstock, platform: Platform, variants: list[Variant]) -> _PlatformBuilds:
    raw = read_recipe(feedstock.recipe_dir)
    environ = smithy_environ(feedstock, platform, raw)
    builds = _PlatformBuilds()
    try:
        for index, variant in enumerate(variants):
            render = render_recipe_text(raw, platform, variant, feedstock.recipe_dir, environ=environ,
                                        build_platform=feedstock.build_platform(platform))
            if render.skipped:
                continue
            for use in used_by_outputs(raw, feedstock.recipe_dir, render, variant):
                builds.outputs.setdefault(use.name, set()).add(index)
    except FeedstockError as err:
        builds.error = str(err)
    return builds


def _rattler_builds(recipe, platform: Platform, variants: list[Variant], cache: RenderCache) -> _PlatformBuilds:
    def render() -> dict:
        builds = _render_builds(recipe, platform, variants)
        return {"outputs": {name: sorted(found) for name, found in builds.outputs.items()}, "error": builds.error}

    return cache.get(["platform", platform.subdir, json.dumps(variants, sort_keys=True, default=str)], render,
                     lambda data: _PlatformBuilds({name: set(found) for name, found in data["outputs"].items()},
                                                  str(data["error"])))


def _render_builds(recipe, platform: Platform, variants: list[Variant]) -> _PlatformBuilds:
    from rattler_build import VariantConfig
    from rattler_build.render import RenderConfig
    from rattler_build.tool_config import PlatformConfig

    config = RenderConfig(platform=PlatformConfig(target_platform=platform.subdir))
    builds = _PlatformBuilds()
    for index, variant in enumerate(variants):
        # one variant per render: every key one value, so no zip_keys; lists and dicts
        # (pin_run_as_build, extend_keys) are conda-build settings rattler-build does not read
        values = {k: [v] for k, v in variant.items() if not isinstance(v, (list, dict))}
        try:
            rendered = recipe.render(VariantConfig(values), config)
        except Exception as err:  # rattler-build raises several error types for a bad render
            builds.error = _one_line(err)
            return builds
        for item in rendered:
            builds.outputs.setdefault(str(item.recipe.package.name), set()).add(index)
    return builds


def _describe(variant: Variant, keys: set[str]) -> str:
    return " ".join(f"{k}={variant[k]}" for k in sorted(keys) if k in variant) or "the only variant"


def compare_platform(platform: Platform, variants: list[Variant], ours: _PlatformBuilds,
                     theirs: _PlatformBuilds) -> list[str]:
    """Lines ``<output> on <platform>: ...`` for every output the two recipes skip differently."""
    where = platform.subdir
    if ours.error or theirs.error:
        if ours.error and theirs.error:
            return []       # neither recipe renders there: they agree that nothing builds
        broken, other, error = (("meta.yaml", "recipe.yaml", ours.error) if ours.error
                                else ("recipe.yaml", "meta.yaml", theirs.error))
        built = sorted((theirs if ours.error else ours).outputs)
        if not built:
            return []       # the other recipe skips the platform: nothing would build either way
        return [f"{where}: {broken} does not render ({error}); {other} builds {', '.join(built)}"]
    lines = []
    for name in sorted(set(ours.outputs) | set(theirs.outputs)):
        mine, other = ours.outputs.get(name, set()), theirs.outputs.get(name, set())
        if mine == other:
            continue
        if not mine or not other:
            lines.append(f"{name} on {where}: meta.yaml {'builds' if mine else 'skips'} it, "
                         f"recipe.yaml {'builds' if other else 'skips'} it")
            continue
        first = min(mine ^ other)
        side = "meta.yaml" if first in mine else "recipe.yaml"
        lines.append(f"{name} on {where}: meta.yaml builds it in {len(mine)} of {len(variants)} variants, "
                     f"recipe.yaml in {len(other)}; only {side} builds it for "
                     f"{_describe(variants[first], loop_keys(variants))}")
    return lines


def platform_skips(feedstock: Feedstock, recipe, report: ParityReport, cache: RenderCache) -> None:
    """Compare, on every known platform, which outputs each recipe builds (adds to ``report``)."""
    first = feedstock.platforms()[0] if feedstock.platforms() else Platform("linux-64")
    fallback = platform_variants(feedstock, first, None)[0]
    for subdir in KNOWN_SUBDIRS:
        platform = Platform(subdir)
        variants = platform_variants(feedstock, platform, fallback)
        start = time.perf_counter()
        ours = _meta_builds(feedstock, platform, variants)
        middle = time.perf_counter()
        theirs = _rattler_builds(recipe, platform, variants, cache)
        report.seconds_ours += middle - start
        report.seconds_rattler += time.perf_counter() - middle
        lines = compare_platform(platform, variants, ours, theirs)
        report.platforms += 1
        report.skip_differences += len(lines)
        report.differences += lines


def parity(root: Path, configs: list[str] | None = None, platforms: bool | None = None) -> ParityReport:
    """Render both recipes for every .ci_support job (or the named ones) and compare; then, unless
    ``platforms`` is False (default: only when no job is named), the skips on every platform."""
    feedstock = load_feedstock(Path(root))
    inputs = protected_files(feedstock)   # a pinning file kept in .ci_support is not a job
    files = sorted(f for f in feedstock.ci_support.glob("*.yaml") if f.name not in inputs)
    if configs:
        files = [f for f in files if f.stem in configs]
    if not files:
        raise FeedstockError(".ci_support/ has no job files; run: python -m feedstock rerender")
    recipe_file = feedstock.recipe_dir / "recipe.yaml"
    recipe = load_v1_recipe(recipe_file)
    cache = RenderCache(recipe_file.read_bytes())   # rattler-build's renders, kept between runs
    report = ParityReport()
    for config in files:
        start = time.perf_counter()
        ours = meta_outputs(feedstock, config)
        middle = time.perf_counter()
        theirs = rattler_outputs(recipe, config, cache)
        report.seconds_ours += middle - start
        report.seconds_rattler += time.perf_counter() - middle
        lines, outputs, equal = compare_config(config.stem, ours, theirs)
        report.configs += 1
        report.outputs += outputs
        report.equal += equal
        report.differences += lines
    if platforms if platforms is not None else not configs:
        platform_skips(feedstock, recipe, report, cache)
    cache.save()
    report.cached, report.rendered = cache.hits, cache.misses
    return report


def lint_findings(root: Path) -> list[str]:
    """Parity differences as lint findings; nothing when the feedstock has no recipe.yaml."""
    feedstock = load_feedstock(Path(root))
    if not (feedstock.recipe_dir / "recipe.yaml").is_file():
        return []
    try:
        report = parity(root)
    except FeedstockError as err:
        return [f"parity: {err}"]
    return [f"parity: {line}" for line in report.differences]


def run(root: Path) -> int:
    """``python -m feedstock parity``: one line per difference, the summary last; exit 1 on any."""
    report = parity(root)
    for line in report.differences:
        print(f"parity: {line}")
    print(f"parity: rendered in {report.seconds_ours:.2f}s (meta.yaml, ours) and "
          f"{report.seconds_rattler:.2f}s (recipe.yaml, rattler-build: {report.rendered} renders, "
          f"{report.cached} from the render cache)")
    print(report.summary)
    return 1 if report.differences else 0
