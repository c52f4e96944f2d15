"""Turn one platform's analysed matrix into CI jobs, the way conda-smithy groups and names them.

A CI job is one value of every *top-level loop key* (keys the top-level build uses that vary);
keys only outputs use (python under megabuild) keep all their values in the one job.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import product
from typing import Any

from ...layout import Feedstock
from ..render.matrix import explode
from ..render.variants import PlatformMatrix

# keys conda-smithy always keeps in the job files when the pinning has them
ALWAYS_KEPT = {
    "zip_keys", "pin_run_as_build", "MACOSX_DEPLOYMENT_TARGET", "MACOSX_SDK_VERSION",
    "macos_min_version", "macos_machine", "channel_sources", "channel_targets", "docker_image",
    "build_number_decrement", "cdt_arch", "cdt_name", "BUILD",
}
FALLBACK_DOCKER_IMAGE = "quay.io/condaforge/linux-anvil-comp7"


@dataclass
class CiJob:
    name: str
    platform: str                       # conda-smithy's linux_64
    config: dict[str, Any]              # key -> list of values (plus zip_keys, pin_run_as_build)


def _groups(values: dict[str, Any]) -> list[list[str]]:
    return [list(g) for g in values.get("zip_keys") or []]


def _trim_zip_keys(values: dict[str, Any]) -> None:
    groups = [[k for k in g if k in values] for g in _groups(values)]
    groups = [g for g in groups if len(g) > 1]
    if groups:
        values["zip_keys"] = groups
    else:
        values.pop("zip_keys", None)


def _trim_pin_run_as_build(values: dict[str, Any]) -> None:
    pins = values.get("pin_run_as_build") or {}
    kept = {pkg: pin for pkg, pin in pins.items() if pkg.replace("-", "_") in values}
    if kept:
        values["pin_run_as_build"] = kept
    else:
        values.pop("pin_run_as_build", None)


def _unique(seq) -> list:
    seen, out = set(), []
    for item in seq:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in str(version).split("."))


def merge_deployment_target(variant: dict[str, Any]) -> dict[str, Any]:
    """On macOS conda-smithy sets MACOSX_DEPLOYMENT_TARGET and c_stdlib_version to the larger of
    the two, and raises MACOSX_SDK_VERSION to at least that."""
    if not str(variant.get("target_platform", "")).startswith("osx") or "c_stdlib_version" not in variant:
        return variant
    stdlib = str(variant["c_stdlib_version"])
    target = str(variant.get("MACOSX_DEPLOYMENT_TARGET", stdlib))
    sdk = str(variant.get("MACOSX_SDK_VERSION", stdlib))
    merged = max(stdlib, target, key=_version_key)
    sdk = max(sdk, merged, key=_version_key)
    return {**variant, "c_stdlib_version": merged, "MACOSX_DEPLOYMENT_TARGET": merged, "MACOSX_SDK_VERSION": sdk}


def used_key_values(matrix: PlatformMatrix) -> dict[str, Any]:
    """Every used key with the values the built variants have (zipped keys move together)."""
    spec = matrix.spec
    inputs = [merge_deployment_target(v) for v in matrix.variants]
    built = [merge_deployment_target(use.variant) for use in matrix.built]
    preserve = matrix.top_level_loop_keys - matrix.all_used
    used = set(matrix.all_used) | ALWAYS_KEPT | matrix.top_level_used
    if any(not (use.render.top.get("build") or {}).get("noarch") for use in matrix.built):
        used.add("target_platform")
    known = set(inputs[0]) if inputs else set()
    values: dict[str, Any] = {}
    for key in used & known:
        if isinstance(inputs[0][key], dict):
            values[key] = inputs[0][key]
    zipped = set()
    for group in _groups(spec):
        zipped |= set(group)
        present = {tuple(v.get(k) for k in group) for v in built}
        kept = [t for t in _unique(tuple(v.get(k) for k in group) for v in inputs) if t in present]
        for i, key in enumerate(group):
            if key in used:
                values[key] = [t[i] for t in kept]
    for key in (used & known) - zipped - set(values):
        if key in ("zip_keys", "extend_keys", "ignore_build_only_deps", "ignore_version"):
            continue
        source = inputs if key in preserve else built
        values[key] = _unique(v[key] for v in source if key in v)
    values["zip_keys"] = _groups(spec)
    _trim_zip_keys(values)
    _trim_pin_run_as_build(values)
    return _deduplicate(values)


def _deduplicate(values: dict[str, Any]) -> dict[str, Any]:
    """Expand and collapse again so that repeated zipped combinations disappear."""
    spec = {k: v for k, v in values.items()}
    spec.setdefault("extend_keys", [])
    rows = explode(spec)
    groups = _groups(values)
    squished: dict[str, Any] = {}
    for key, value in values.items():
        if key == "zip_keys" or isinstance(value, dict):
            squished[key] = value
    zipped = {k for g in groups for k in g}
    for key in values:
        if key in squished or key in zipped:
            continue
        squished[key] = _unique(row[key] for row in rows)
    for group in groups:
        tuples = _unique(tuple(row[k] for k in group) for row in rows)
        for i, key in enumerate(group):
            squished[key] = [t[i] for t in tuples]
    _trim_zip_keys(squished)
    _trim_pin_run_as_build(squished)
    return squished


def _sort_config(config: dict[str, Any], groups: list[list[str]]) -> None:
    """Sorted lists (zipped keys sorted together by their tuples), pins ordered like conda-smithy."""
    orders: dict[str, list[int]] = {}
    for group in groups:
        group = [k for k in group if k in config]
        if not group:
            continue
        tuples = list(zip(*(config[k] for k in group)))
        order = sorted(range(len(tuples)), key=tuples.__getitem__)
        for key in group:
            orders[key] = order
    for key, value in list(config.items()):
        if isinstance(value, (list, tuple)):
            value = list(value)
            config[key] = [value[i] for i in orders[key]] if key in orders else sorted(value)
        if key == "pin_run_as_build":
            config[key] = {pkg: {pin: value[pkg][pin] for pin in sorted(value[pkg], reverse=True)}
                           for pkg in sorted(value)}


def split_into_jobs(top_level_keys: set[str], values: dict[str, Any]) -> list[dict[str, Any]]:
    """One config per combination of top-level key values; the rest stay as lists."""
    remaining = dict(values)
    groups = _groups(remaining)
    handled: set[str] = set()
    dimensions: list[list[dict[str, Any]]] = []
    for key in sorted(top_level_keys):
        if key in handled or key not in remaining:
            continue
        group = next((g for g in groups if key in g), None)
        if group is None:
            dimensions.append([{key: [value]} for value in remaining.pop(key)])
            continue
        handled |= set(group)
        by_top: dict[tuple, dict[str, list]] = {}
        for i in range(len(remaining[key])):
            top = tuple(remaining[k][i] for k in group if k in top_level_keys)
            merged = by_top.setdefault(top, {k: [] for k in group})
            for k in group:
                merged[k].append(remaining[k][i])
        for k in group:
            del remaining[k]
        dimensions.append(list(by_top.values()))
    _sort_config(remaining, groups)
    for dimension in dimensions:
        for part in dimension:
            _sort_config(part, groups)
    if remaining:
        dimensions.append([remaining])
    configs = []
    for parts in product(*dimensions):
        config: dict[str, Any] = {}
        for part in parts:
            config.update(part)
        configs.append(config)
    return configs


def job_name(platform_name: str, config: dict[str, Any], top_level_keys: set[str]) -> str:
    key = "".join(k + str(config[k][0]) for k in sorted(top_level_keys) if k != "target_platform")
    name = f"{platform_name}_" + key.replace("*", "_").replace(" ", "_")
    if len("conda-forge-build-done-" + name) >= 250:
        name = name[:35] + "_h" + hashlib.sha256(name.encode()).hexdigest()[:10]
    return name


def _finalize(config: dict[str, Any], linux_build: bool) -> dict[str, Any]:
    if linux_build:
        config["docker_image"] = [config["docker_image"][0]] if "docker_image" in config else [FALLBACK_DOCKER_IMAGE]
        for group in config.get("zip_keys") or []:
            if "docker_image" in group:
                for key in group:
                    if key != "docker_image":
                        config[key] = [config[key][0]]
    return config


def platform_jobs(feedstock: Feedstock, matrix: PlatformMatrix) -> list[CiJob]:
    """The CI jobs of one platform (none when every variant is skipped)."""
    if not matrix.built:
        return []
    top_keys = matrix.top_level_loop_keys
    linux_build = feedstock.build_platform(matrix.platform).os == "linux"
    jobs = []
    for config in split_into_jobs(top_keys, used_key_values(matrix)):
        name = job_name(matrix.platform.name, config, top_keys)
        jobs.append(CiJob(name=name, platform=matrix.platform.name, config=_finalize(config, linux_build)))
    return sorted(jobs, key=lambda job: job.name)
