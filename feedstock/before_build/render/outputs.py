"""``render``: what one .ci_support job builds, output by output (the renderer API).

``render_ci_config(feedstock_root, config_name)`` is the contract other tools use (for example
build-locally's --dry-run).

Build string hash (how ``h<7 hex>`` is computed): for each output, the variant keys the
output uses (found as conda-build finds them, minus keys that only name run requirements,
minus python/perl/lua/r_base unless their value has a build part like ``3.12.* *_cpython``)
with their values, as JSON with sorted keys, hashed with SHA-1; ``h`` + the first 7 hex
digits. That is conda-build's own recipe, so it changes exactly when a used value changes.
"""
from __future__ import annotations

import hashlib
import os
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


from ...errors import FeedstockError
from ...text_input import load_yaml, read_text
from ...layout import Feedstock, load_feedstock
from ...platforms import Platform
from common.suggest import did_you_mean
from .jinja_functions import DEFERRED_PINS, resolve_pin_tokens
from .matrix import explode
from .recipe_render import HASH_PLACEHOLDER, read_recipe, render_recipe_text
from .selector_check import refuse_bad_selectors
from .variant_config import load_variant_spec
from .variants import smithy_environ, used_by_outputs

_HASH_EXCLUDED = ("python", "r_base", "perl", "lua")
_REQUIREMENT_SECTIONS = ("build", "host", "run", "run_constrained")


@dataclass
class RenderedOutput:
    name: str
    version: str
    build_string: str
    build_number: int
    requirements: dict[str, list[str]]
    run_exports: Any
    tests: dict[str, Any]
    track_features: list[str] = field(default_factory=list)
    config: str = ""
    target_platform: str = ""
    variant: dict[str, str] = field(default_factory=dict)   # the used keys and their values
    # the variables conda-build passes from the environment into this output's build script
    script_env: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def hash_contents(used: set[str], variant: dict[str, Any], run: list[str]) -> dict[str, Any]:
    keys = sorted(k for k in used if k in variant and not isinstance(variant[k], (dict, list)))
    keys = [k for k in keys if k not in _HASH_EXCLUDED or " " in str(variant[k])]
    contents = {} if keys == ["target_platform"] else {k: variant[k] for k in keys}
    contents.update({req.split(" ")[0]: req for req in run if str(req).startswith("__")})
    return contents


def build_hash(used: set[str], variant: dict[str, Any], run: list[str]) -> str:
    contents = hash_contents(used, variant, run)
    if not contents:
        return ""
    return "h" + hashlib.sha1(json.dumps(contents, sort_keys=True).encode()).hexdigest()[:7]


def _build_string(output: dict[str, Any], number: int, hash_: str, variant: dict[str, Any]) -> str:
    template = (output.get("build") or {}).get("string")
    if template:
        text = str(template)
        return re.sub(r"h" + HASH_PLACEHOLDER, hash_ or "", text) if hash_ else text
    # conda-build's default: py/np prefixes for what the output builds against, the hash, the number
    host = [str(r).split(" ")[0] for r in ((output.get("requirements") or {}).get("host") or [])]
    prefix = ""
    if "numpy" in host and "numpy" in variant:
        prefix += "np" + "".join(str(variant["numpy"]).split(".")[:2])
    if "python" in host and "python" in variant:
        prefix += "py" + "".join(str(variant["python"]).split(" ")[0].split(".")[:2])
    return f"{prefix}{hash_}_{number}"


_PLAIN_VERSION = re.compile(r"[\w.-]+")


def _valid_spec(spec: str) -> str:
    """A bare version pin becomes a prefix match (``zlib 1.3`` -> ``zlib 1.3.*``), as conda-build
    does; specs with an operator, a wildcard or a build string stay as they are."""
    parts = spec.split()
    if len(parts) == 2 and _PLAIN_VERSION.fullmatch(parts[0]) and _PLAIN_VERSION.fullmatch(parts[1]):
        return f"{parts[0]} {parts[1]}.*"
    return spec


def pin_from_variant(requirements: list[str], variant: dict[str, Any]) -> list[str]:
    """Build/host requirements named without a version take the variant's pin (``- zlib``)."""
    pinned = []
    for req in requirements:
        key = req.strip().replace("-", "_")
        value = variant.get(key)
        if " " not in req.strip() and isinstance(value, str) and key not in ("target_platform",):
            pinned.append(_valid_spec(f"{req.strip()} {value}"))
        else:
            pinned.append(req)
    return pinned


def ci_config_path(feedstock: Feedstock, config_name: str) -> Path:
    """The job file for ``config_name`` (name, name.yaml or a path); one-line error if unknown."""
    candidate = Path(config_name)
    if candidate.suffix == ".yaml" and candidate.is_file() and candidate.parent != Path("."):
        return candidate
    name = candidate.name[:-5] if candidate.name.endswith(".yaml") else candidate.name
    path = feedstock.ci_support / f"{name}.yaml"
    if os.path.lexists(path):  # a folder or a broken link there is read, and refused, as such
        return path
    known = sorted(p.stem for p in feedstock.ci_support.glob("*.yaml"))
    if not known:
        raise FeedstockError(f"config '{name}' not found: .ci_support/ is empty; run: python -m feedstock rerender")
    hint = did_you_mean(name, known, limit=3) or f"known configs: {', '.join(known)}"
    raise FeedstockError(f"config '{name}' not found; {hint}")


def load_ci_config(path: Path) -> dict[str, Any]:
    label = f".ci_support/{path.name}"
    try:
        data = load_yaml(read_text(path, label), label, strings=True) or {}
    except FeedstockError as err:
        raise FeedstockError(f"{err}; or regenerate it: python -m feedstock rerender") from None
    if not isinstance(data, dict) or "target_platform" not in data:
        raise FeedstockError(f"{path.name} has no target_platform; it is not a .ci_support config")
    platforms = data["target_platform"]
    if not (isinstance(platforms, list) and len(platforms) == 1 and Platform(str(platforms[0])).is_known):
        raise FeedstockError(f"{path.name}: target_platform must be a one-item list of a conda platform "
                             f"such as [linux-64], not {platforms!r}; run: python -m feedstock rerender")
    return data


def job_variants(feedstock: Feedstock, job: dict[str, Any], platform: Platform) -> list[dict[str, Any]]:
    """Every variant one job builds: the job's values over the full config's other keys."""
    spec = load_variant_spec(feedstock.variant_config_files(), platform, feedstock.root,
                             feedstock.build_platform(platform))
    base = {k: (v[0] if isinstance(v, list) and v else v) for k, v in spec.items() if k != "zip_keys"}
    job_spec = {k: v for k, v in job.items()}
    job_spec.setdefault("extend_keys", [])
    return [{**base, **variant} for variant in explode(job_spec)]


def _resolve(value: Any, identities: dict[str, tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return resolve_pin_tokens(value, identities)
    if isinstance(value, list):
        return [_resolve(v, identities) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, identities) for k, v in value.items()}
    return value


@dataclass
class _VariantOutput:
    """One output of one variant: recipe position, data with pins resolved, used keys, identity."""

    index: int
    name: str
    data: dict[str, Any]
    used: set[str]
    version: str
    number: int
    build_string: str


def _run_requirements(data: dict[str, Any]) -> list[str]:
    requirements = data.get("requirements") or {}
    return [str(r) for r in (requirements if isinstance(requirements, list) else requirements.get("run") or [])]


def _render_variant(feedstock: Feedstock, raw: str, platform: Platform, variant: dict[str, Any],
                    environ: dict[str, str]) -> list[_VariantOutput]:
    """Every output this variant builds, pins resolved.

    One render: pin_subpackage() leaves tokens, replaced once every output's build string is known.
    """
    render = render_recipe_text(raw, platform, variant, feedstock.recipe_dir, subpackages=DEFERRED_PINS,
                                environ=environ, build_platform=feedstock.build_platform(platform))
    if render.skipped:
        return []
    top_number = int((render.top.get("build") or {}).get("number") or 0)
    top_version = str((render.top.get("package") or {}).get("version", ""))
    uses = used_by_outputs(raw, feedstock.recipe_dir, render, variant)
    outputs = []
    for use in uses:
        number = int((use.data.get("build") or {}).get("number", top_number) or 0)
        hash_ = build_hash(use.used, variant, _run_requirements(use.data))
        outputs.append(_VariantOutput(use.index, use.name, use.data, use.used,
                                      str(use.data.get("version") or top_version), number,
                                      _build_string(use.data, number, hash_, variant)))
    identities = {out_.name: (out_.version, out_.build_string) for out_ in outputs}
    for out_ in outputs:
        out_.data = _resolve(out_.data, identities)
    return outputs


def script_env_names(build: Any) -> list[str]:
    """The variable names of a rendered build section's ``script_env``, as conda-build reads them:
    ``NAME`` passes the environment's value, ``NAME=value`` sets one; anything else passes nothing."""
    listed = build.get("script_env") if isinstance(build, dict) else None
    if not isinstance(listed, list):
        return []
    return [str(item).split("=", 1)[0].strip() for item in listed
            if isinstance(item, (str, int, float)) and str(item).split("=", 1)[0].strip()]


def _section(requirements: dict[str, Any], section: str, variant: dict[str, Any]) -> list[str]:
    reqs = [str(r) for r in (requirements.get(section) or [])]
    return pin_from_variant(reqs, variant) if section in ("build", "host") else reqs


def render_ci_config(feedstock_root: Path, config_name: str) -> list[RenderedOutput]:
    """Render the recipe for one .ci_support job; one entry per distinct output it builds."""
    feedstock = load_feedstock(Path(feedstock_root))
    path = ci_config_path(feedstock, config_name)
    refuse_bad_selectors(feedstock, "fix it, then render again")
    return render_job(feedstock, path.stem, load_ci_config(path))


def render_job(feedstock: Feedstock, job_name: str, job: dict[str, Any]) -> list[RenderedOutput]:
    """Render the recipe for one job's values (a .ci_support file's content)."""
    platform = Platform(str(job["target_platform"][0]))
    raw = read_recipe(feedstock.recipe_dir)
    environ = smithy_environ(feedstock, platform, raw)
    rendered: list[tuple[int, RenderedOutput]] = []
    seen: set[tuple] = set()
    for variant in job_variants(feedstock, job, platform):
        for out_ in _render_variant(feedstock, raw, platform, variant, environ):
            output, used, name = out_.data, out_.used, out_.name
            identity = (name, tuple(sorted((k, str(variant.get(k))) for k in used)))
            if identity in seen:
                continue
            seen.add(identity)
            build = output.get("build") or {}
            requirements = output.get("requirements") or {}
            if isinstance(requirements, list):
                requirements = {"run": requirements}
            rendered.append((out_.index, RenderedOutput(
                name=name,
                version=out_.version,
                build_string=out_.build_string,
                build_number=out_.number,
                requirements={s: _section(requirements, s, variant) for s in _REQUIREMENT_SECTIONS
                              if requirements.get(s)},
                run_exports=build.get("run_exports") or [],
                tests=output.get("test") or {},
                track_features=[str(f) for f in (build.get("track_features") or [])],
                config=job_name,
                target_platform=platform.subdir,
                variant={k: str(variant[k]) for k in sorted(used) if k in variant},
                script_env=script_env_names(build),
            )))
    # recipe order, then build string: libtorch, linalg magma/nomagma, pytorch py310..., metapackage
    return [out for _, out in sorted(rendered, key=lambda item: (item[0], item[1].build_string))]


def format_outputs(outputs: list[RenderedOutput]) -> str:
    """Human-readable listing, one block per output."""
    lines: list[str] = []
    for out in outputs:
        lines.append(f"{out.name} {out.version} {out.build_string} (build number {out.build_number})")
        for section, reqs in out.requirements.items():
            lines.append(f"  {section}:")
            lines += [f"    - {r}" for r in reqs]
        if out.run_exports:
            lines.append(f"  run_exports: {json.dumps(out.run_exports)}")
        if out.track_features:
            lines.append(f"  track_features: {', '.join(out.track_features)}")
        if out.script_env:
            lines.append(f"  script_env: {', '.join(out.script_env)}")
        if out.tests:
            parts = [f"{k} ({len(v) if isinstance(v, list) else 1})" for k, v in out.tests.items()]
            lines.append(f"  tests: {', '.join(parts)}")
        else:
            lines.append("  tests: none")
    return "\n".join(lines)
