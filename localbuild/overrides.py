"""Developer overrides (--python, --cuda-arch, --rocm-arch, --jobs, --heavy-jobs, --compile-cache, --dev-tag).

They reach the build as the contract's environment variables; --python is applied through a
derived copy of the config (``.ci_support/`` is never edited). Overrides that change what a
package contains (Pythons, GPU architectures, an explicit --dev-tag) make a *development build*:
FEEDSTOCK_DEV_TAG is set so the recipe's build strings carry ``dev<tag>_``, and the done-marker
and log get the tag too, so a later release build of the same config is never skipped.
--jobs, --heavy-jobs and --compile-cache (--ccache DIR is its older spelling) only change how fast the same
package is built and keep release builds.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from . import ci_yaml
from .configs import CiConfig
from .errors import EXIT_USAGE, LocalBuildError

if TYPE_CHECKING:
    from .request import BuildRequest

def python_subset(request: "BuildRequest", config: CiConfig) -> tuple[list[int] | None, str | None]:
    """(the indices of the config's Pythons to keep, None for all of them; why the config
    cannot be built with the asked Pythons, or None)."""
    if not request.pythons:
        return None, None
    labels = [entry.label for entry in config.pythons]
    missing = [p for p in request.pythons if p not in labels]
    if missing:
        return None, f"no python {', '.join(missing)}: the config builds {', '.join(labels) or 'none'}"
    if len(request.pythons) < len(config.pythons):
        return [entry.index for entry in config.pythons if entry.label in request.pythons], None
    return None, None


def dev_tag(request: "BuildRequest", config: CiConfig) -> str | None:
    """The dev build's tag (None: a release build): --dev-tag, else made of what changes the
    package's contents (fewer Pythons, the arch lists)."""
    if request.dev_tag is not None:
        return request.dev_tag
    parts: list[str] = []
    keep, _ = python_subset(request, config)
    if keep is not None:
        parts += ["py" + label.replace(".", "") for label in request.pythons]
    backend = config.gpu[0]
    if request.cuda_arch and backend == "cuda":
        parts.append("sm" + re.sub(r"[^0-9a-zA-Z]", "", request.cuda_arch.replace("+PTX", "ptx")))
    if request.rocm_arch and backend == "rocm":
        parts.append(re.sub(r"[^0-9a-zA-Z]", "", request.rocm_arch))
    return _short_tag("".join(parts)) if parts else None


def override_environment(request: "BuildRequest", config: CiConfig) -> dict[str, str]:
    """The contract's variables (recipe/megabuild/overrides.py) the request sets for this config."""
    env: dict[str, str] = {}
    backend = config.gpu[0]
    if request.cuda_arch and backend == "cuda":
        env["FEEDSTOCK_CUDA_ARCH_LIST"] = request.cuda_arch
    if request.rocm_arch and backend == "rocm":
        env["FEEDSTOCK_ROCM_ARCH"] = request.rocm_arch
    if request.jobs is not None:
        env["FEEDSTOCK_MAX_JOBS"] = str(request.jobs)
    if request.heavy_jobs is not None:
        env["FEEDSTOCK_HEAVY_JOBS"] = str(request.heavy_jobs)
    tag = dev_tag(request, config)
    if tag is not None:
        env["FEEDSTOCK_DEV_TAG"] = tag
    return env


def _short_tag(tag: str) -> str:
    """Readable when short; long tags become a stable 10-character hash."""
    if len(tag) <= 24:
        return tag
    import hashlib

    return "h" + hashlib.sha1(tag.encode()).hexdigest()[:9]


def derived_config_text(config: CiConfig, keep_python_indices: list[int] | None,
                        channels: list[str] | None = None) -> str:
    """The config's text with only the kept Pythons (and the values zipped with them; None:
    all of them) and, given channels, those as its channel_sources."""
    text = "\n".join(config.doc.lines) + "\n"
    if keep_python_indices is not None:
        text = _python_subset(config, keep_python_indices)
    if channels:
        doc = ci_yaml.parse(text, str(config.path))
        if "channel_sources" in doc.item_lines:
            text = ci_yaml.with_items(doc, "channel_sources", [",".join(channels)])
        else:
            text += "channel_sources:\n- " + json.dumps(",".join(channels)) + "\n"
    return text


def _python_subset(config: CiConfig, keep_python_indices: list[int]) -> str:
    group = config.zip_group("python")
    total = len(config.pythons)
    drop = set(range(total)) - set(keep_python_indices)
    plan: dict[str, set[int]] = {}
    for key in group:
        spans = config.doc.item_lines.get(key)
        if spans is None:
            continue  # a zip key the config does not carry as a list: nothing to subset
        if len(spans) != total:
            raise LocalBuildError(
                f"{config.path.name}: '{key}' is zipped with python but has {len(spans)} entries "
                f"for {total} Pythons; regenerate it with `python -m feedstock rerender`",
                EXIT_USAGE)
        plan[key] = drop
    return ci_yaml.without_items(config.doc, plan)
