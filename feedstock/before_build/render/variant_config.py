"""Load variant config files (the pinning file, recipe/conda_build_config.yaml) for one platform.

conda-build's rules: selectors are applied per platform before YAML parsing, every scalar stays
a string (``'3.10'`` is not ``3.1``), later files override earlier ones, ``zip_keys`` groups and
``extend_keys`` (``pin_run_as_build``, ...) are merged, and a zipped key can only be overridden
together with its group (or with the same number of entries).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping


from ...errors import FeedstockError
from ...text_input import load_yaml, read_text
from ...platforms import DEFAULT_COMPILERS, Platform, selector_namespace
from .selectors import select_lines

Spec = dict[str, Any]

_DEFAULT_EXTEND_KEYS = ["pin_run_as_build", "ignore_version", "ignore_build_only_deps", "extend_keys"]


def internal_defaults(platform: Platform) -> Spec:
    """What conda-build assumes before reading any file (a later file overrides each of these)."""
    spec: Spec = {
        "python": "3.12",
        "numpy": "1.26",
        "perl": "5.26.2",
        "lua": "5",
        "r_base": "3.5",
        "cpu_optimization_target": "nocona",
        "pin_run_as_build": {
            "python": {"min_pin": "x.x", "max_pin": "x.x"},
            "r-base": {"min_pin": "x.x", "max_pin": "x.x"},
        },
        "ignore_version": [],
        "ignore_build_only_deps": ["python", "numpy"],
        "extend_keys": list(_DEFAULT_EXTEND_KEYS),
        "cran_mirror": "https://cran.r-project.org",
        "target_platform": platform.subdir,
    }
    for language, package in DEFAULT_COMPILERS.get(platform.os, {}).items():
        spec[f"{language}_compiler"] = package
    return spec


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        return list(value)
    return [value]


def _trim_empty(spec: dict) -> None:
    for key in list(spec):
        value = spec[key]
        if isinstance(value, dict):
            _trim_empty(value)
        if value in ("", None, [], {}):
            del spec[key]


def zip_groups(spec: Spec) -> list[list[str]]:
    """``zip_keys`` as a list of groups (a single flat list is one group)."""
    groups = spec.get("zip_keys") or []
    if groups and all(isinstance(item, str) for item in groups):
        return [list(groups)]
    return [list(group) for group in groups if group]


def _label(path: Path, root: Path | None) -> str:
    try:
        return str(path.relative_to(root)) if root else str(path)
    except ValueError:
        return str(path)


def parse_config_file(path: Path, platform: Platform, root: Path | None = None,
                      build_platform: Platform | None = None,
                      environ: Mapping[str, str] | None = None) -> Spec:
    """One variant config file with its selectors applied for ``platform``."""
    label = _label(path, root)
    try:
        text = read_text(path, label)
    except FileNotFoundError:
        raise FeedstockError(f"cannot read variant config {label}: not found; check the path") from None
    linenos: list[int] = []
    selected = select_lines(text, selector_namespace(platform, build_platform=build_platform, environ=environ), label,
                            kept_linenos=linenos)
    spec = load_yaml(selected, label, strings=True, line_map=linenos, context=f" on {platform.subdir}") or {}
    if not isinstance(spec, dict):
        raise FeedstockError(f"{label}: expected a mapping of variant keys to lists; fix the file")
    _trim_empty(spec)
    _validate(spec, label, platform)
    return spec


def _validate(spec: Spec, label: str, platform: Platform) -> None:
    for key in spec:
        if "-" in key:
            raise FeedstockError(f"{label}: variant key '{key}' contains '-'; use '_' instead")
    raw = spec.get("zip_keys")
    if raw is not None and not (
        isinstance(raw, list)
        and (all(isinstance(k, str) for k in raw)
             or all(isinstance(g, list) and all(isinstance(k, str) for k in g) for g in raw))
    ):
        raise FeedstockError(f"{label}: zip_keys must be a list of lists of key names")
    seen: set[str] = set()
    for group in zip_groups(spec):
        for key in group:
            if key not in spec:
                raise FeedstockError(f"{label}: zip_keys group [{', '.join(group)}] names '{key}', "
                                     f"which has no values on {platform.subdir}; define it or drop it from the group")
            if key in seen:
                raise FeedstockError(f"{label}: '{key}' appears in more than one zip_keys group; "
                                     "a key can be zipped only once")
            seen.add(key)
        lengths = {key: len(_as_list(spec[key])) for key in group}
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise FeedstockError(f"{label}: zip_keys group [{', '.join(group)}] has lists of different "
                                 f"lengths on {platform.subdir} ({detail}); give every key in the group "
                                 "the same number of entries")


def combine_specs(specs: list[tuple[str, Spec]]) -> Spec:
    """Merge specs in order, later ones winning (conda-build's combine rules)."""
    extend_keys = set(_DEFAULT_EXTEND_KEYS)
    for _, spec in specs:
        extend_keys.update(_as_list(spec.get("extend_keys")))
    groups: list[list[str]] = []
    for _, spec in specs:
        for group in zip_groups(spec):
            if group not in groups:
                groups.append(group)
    combined: Spec = {}
    for label, spec in specs:
        for key, value in spec.items():
            if key == "zip_keys":
                continue
            if key in extend_keys:
                if isinstance(value, dict):
                    merged = dict(combined.get(key) or {})
                    merged.update(value)
                    combined[key] = merged
                else:
                    merged_list = _as_list(combined.get(key))
                    merged_list += [v for v in _as_list(value) if v not in merged_list]
                    combined[key] = merged_list
                continue
            if isinstance(value, dict):
                combined[key] = dict(value)
                continue
            group = next((g for g in groups if key in g), [key])
            if all(item in spec for item in group):
                for item in group:
                    combined[item] = _as_list(spec[item])
            else:
                # overriding part of a zip group is only allowed with the same number of entries
                for item in group:
                    other = spec[item] if item in spec else combined.get(item)
                    if item != key and other is not None and len(_as_list(other)) != len(_as_list(value)):
                        missing = [g for g in group if g not in spec]
                        raise FeedstockError(
                            f"{label}: '{key}' has {len(_as_list(value))} entries but is zipped with "
                            f"{', '.join(missing)} ({len(_as_list(other))} entries); override the whole "
                            "zip_keys group or keep the lengths equal")
                combined[key] = _as_list(value)
    combined["zip_keys"] = groups
    return combined


def load_variant_spec(files: list[Path], platform: Platform, root: Path | None = None,
                      build_platform: Platform | None = None,
                      environ: Mapping[str, str] | None = None) -> Spec:
    """The combined variant spec for ``platform``: internal defaults, then ``files`` in order."""
    specs: list[tuple[str, Spec]] = [("internal defaults", internal_defaults(platform))]
    for index, path in enumerate(files):
        spec = parse_config_file(path, platform, root, build_platform, environ)
        if index == 0 and len(files) > 1 and not spec:
            # the pinning file pins the compilers and every library: empty, the matrix loses them
            raise FeedstockError(f"{_label(path, root)} has no variant keys on {platform.subdir} "
                                 "(is it empty?); restore the pinning file")
        specs.append((_label(path, root), spec))
    return combine_specs(specs)
