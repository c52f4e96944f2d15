"""Cut meta.yaml's raw text into the pieces conda-build scans: top level, outputs, requirements.

conda-build finds the variables a recipe uses by searching text, not parsed YAML, so the
variant engine needs the same slices of text it looks at.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Mapping

from .selectors import select_lines

_OUTPUTS_RE = re.compile(r"(^outputs:.*?)(?=^test:|^extra:|^about:|\Z)", re.M | re.S)
# one output: from "  - name:" (or "- type:") to the next one or the next top-level key
_OUTPUT_BLOCK_RE = re.compile(r"^\ +-\ +(?:name|type):.+?(?=^\w|\Z|^\ +-\ +(?:name|type))", re.M | re.S)
_REQUIREMENTS_RE = re.compile(r"requirements:.+?(?=^\w|\Z|^\s+-\s(?=name|type))", re.M | re.S)


@lru_cache(maxsize=256)
def _outputs_section(raw: str) -> str:
    match = _OUTPUTS_RE.search(raw)
    return match.group(1) if match else ""


@lru_cache(maxsize=256)
def _output_blocks(section: str) -> tuple[str, ...]:
    return tuple(_OUTPUT_BLOCK_RE.findall(section))


def outputs_text(raw: str, namespace: Mapping[str, Any] | None) -> str:
    """The ``outputs:`` section (selected for ``namespace`` unless it is None)."""
    text = _outputs_section(raw)
    return select_lines(text, namespace, "recipe/meta.yaml").rstrip() if namespace is not None else text.rstrip()


def output_text(raw: str, index: int, namespace: Mapping[str, Any] | None) -> str:
    """The text of the output at ``index`` among the rendered outputs ("" when out of range)."""
    blocks = _output_blocks(outputs_text(raw, namespace))
    return blocks[index] if 0 <= index < len(blocks) else ""


def whole_text(raw: str, namespace: Mapping[str, Any] | None) -> str:
    return select_lines(raw, namespace, "recipe/meta.yaml").rstrip() if namespace is not None else raw.rstrip()


def top_level_with_output(raw: str, index: int, namespace: Mapping[str, Any] | None) -> str:
    """The recipe without its outputs section, plus one output (conda-build's "top level" view)."""
    return whole_text(raw, namespace).replace(outputs_text(raw, namespace).strip(), "") + output_text(raw, index, namespace)


@lru_cache(maxsize=1024)
def requirements_text(text: str) -> str:
    """The first ``requirements:`` block in ``text``."""
    match = _REQUIREMENTS_RE.search(text)
    return match.group() if match else ""
