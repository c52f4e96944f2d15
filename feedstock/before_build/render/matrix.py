"""Expand a combined variant spec into the full matrix of variants (one dict per combination)."""
from __future__ import annotations

from itertools import product
from typing import Any

from common.input_files import too_many_variants

from ...errors import FeedstockError
from .variant_config import Spec, zip_groups

Variant = dict[str, Any]

# keys that are carried into every variant as they are, never expanded
PASSTHRU_KEYS = {"replacements", "extend_keys", "zip_keys"}


def passthru_keys(spec: Spec) -> set[str]:
    extend = set(spec.get("extend_keys") or []) | {"extend_keys", "zip_keys"}
    zipped = {key for group in zip_groups(spec) for key in group}
    dict_valued = {key for key, value in spec.items() if isinstance(value, dict)}
    return ((PASSTHRU_KEYS | extend | dict_valued) - zipped) & set(spec)


def explode(spec: Spec) -> list[Variant]:
    """Every combination: each non-zipped key varies freely, each zip group moves as one."""
    carried = {key: spec[key] for key in passthru_keys(spec)}
    groups = [tuple(g) for g in zip_groups(spec) if all(k in spec for k in g)]
    zipped = {key for group in groups for key in group}
    axes: list[tuple[tuple[str, ...], list[tuple]]] = []
    for key in sorted(set(spec) - set(carried) - zipped):
        values = spec[key] if isinstance(spec[key], list) else [spec[key]]
        if values:
            axes.append(((key,), [(v,) for v in values]))
    for group in groups:
        columns = [spec[k] if isinstance(spec[k], list) else [spec[k]] for k in group]
        axes.append((group, list(zip(*columns))))
    check_size(axes)
    variants = []
    for choice in product(*(values for _, values in axes)):
        variant: Variant = dict(carried)
        for (keys, _), values in zip(axes, choice):
            variant.update(zip(keys, values))
        variants.append(variant)
    return variants


def check_size(axes: list[tuple[tuple[str, ...], list[tuple]]]) -> None:
    """Refuse a matrix over MAX_VARIANTS before making it, naming the keys that make it big."""
    problem = too_many_variants([("/".join(keys), len(values)) for keys, values in axes])
    if problem:
        raise FeedstockError(f"the variant matrix would have {problem}; remove values, or zip keys that "
                             "change together (zip_keys)")


def loop_keys(variants: list[Variant], subset: set[str] | None = None) -> set[str]:
    """Keys whose value differs between variants (the matrix dimensions), optionally within subset."""
    if not variants:
        return set()
    first = variants[0]
    special = {"pin_run_as_build", "zip_keys", "ignore_version", *(first.get("extend_keys") or [])}
    keys = set(first) - special
    if subset is not None:
        keys &= subset
    return {k for k in keys if any(other.get(k) != first.get(k) for other in variants[1:])}
