"""Cut meta.yaml's raw text into the pieces conda-build scans: top level, outputs, requirements.

conda-build finds the variables a recipe uses by searching text, not parsed YAML, so the
variant engine needs the same slices of text it looks at.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

from .selectors import select_lines

_SECTION_ENDS = ("test:", "extra:", "about:")


def _line_starts(text: str, after: int = 0):
    """Offsets where a line begins (0 and each position after a newline), from ``after`` on."""
    if after <= 0:
        position = 0
    elif text[after - 1] == "\n":
        position = after
    else:
        newline = text.find("\n", after)
        if newline < 0:
            return
        position = newline + 1
    while True:
        yield position
        newline = text.find("\n", position)
        if newline < 0:
            return
        position = newline + 1


def _section_of_outputs(raw: str) -> str:
    """From the first line starting ``outputs:`` to the next top-level test/extra/about key."""
    start = next((p for p in _line_starts(raw) if raw.startswith("outputs:", p)), None)
    if start is None:
        return ""
    end = next((p for p in _line_starts(raw, start + 1) if raw.startswith(_SECTION_ENDS, p)), len(raw))
    return raw[start:end]


def _dash_item(text: str, position: int) -> int:
    """Where the word after ``<spaces>-<spaces>`` starts on the line at ``position`` (-1 if not)."""
    cursor = position
    while cursor < len(text) and text[cursor] == " ":
        cursor += 1
    if cursor == position or not text.startswith("-", cursor):
        return -1
    cursor += 1
    word = cursor
    while word < len(text) and text[word] == " ":
        word += 1
    return word if word > cursor else -1


def _names_output(text: str, position: int, colon: bool) -> bool:
    word = _dash_item(text, position)
    keys = ("name:", "type:") if colon else ("name", "type")
    return word >= 0 and text.startswith(keys, word)


def _blocks_of_outputs(section: str) -> tuple[str, ...]:
    """Each ``  - name:`` (or ``type:``) item up to the next item or a top-level key."""
    blocks = []
    resume = 0
    for start in list(_line_starts(section)):
        if start < resume or not _names_output(section, start, colon=True):
            continue
        first_body = section.find(":", _dash_item(section, start)) + 2   # at least one character
        if first_body > len(section):
            break
        end = next((p for p in _line_starts(section, first_body)
                    if (p < len(section) and (section[p].isalnum() or section[p] == "_"))
                    or _names_output(section, p, colon=False)), len(section))
        blocks.append(section[start:end])
        resume = end
    return tuple(blocks)


def _first_requirements(text: str) -> str:
    """From the first ``requirements:`` to the next top-level key or the next output item."""
    start = text.find("requirements:")
    if start < 0:
        return ""
    first_body = start + len("requirements:") + 1
    if first_body > len(text):
        return ""

    def ends_here(p: int) -> bool:
        if p < len(text) and (text[p].isalnum() or text[p] == "_"):
            return True
        blank = p
        while blank < len(text) and text[blank].isspace():
            blank += 1
        return (blank > p and text.startswith("-", blank) and blank + 1 < len(text)
                and text[blank + 1].isspace() and text.startswith(("name", "type"), blank + 2))

    end = next((p for p in _line_starts(text, first_body) if ends_here(p)), len(text))
    return text[start:end]


@lru_cache(maxsize=256)
def _outputs_section(raw: str) -> str:
    return _section_of_outputs(raw)


@lru_cache(maxsize=256)
def _output_blocks(section: str) -> tuple[str, ...]:
    return _blocks_of_outputs(section)


def _selected(text: str, namespace: Mapping[str, Any] | None) -> str:
    """``text`` with the selectors applied for ``namespace`` (as it is when None), right-stripped."""
    return (select_lines(text, namespace, "recipe/meta.yaml") if namespace is not None else text).rstrip()


def outputs_text(raw: str, namespace: Mapping[str, Any] | None) -> str:
    """The ``outputs:`` section (selected for ``namespace`` unless it is None)."""
    return _selected(_outputs_section(raw), namespace)


def output_text(raw: str, index: int, namespace: Mapping[str, Any] | None) -> str:
    """The text of the output at ``index`` among the rendered outputs ("" when out of range)."""
    blocks = _output_blocks(outputs_text(raw, namespace))
    return blocks[index] if 0 <= index < len(blocks) else ""


def whole_text(raw: str, namespace: Mapping[str, Any] | None) -> str:
    return _selected(raw, namespace)


def top_level_with_output(raw: str, index: int, namespace: Mapping[str, Any] | None) -> str:
    """The recipe without its outputs section, plus one output (conda-build's "top level" view)."""
    return whole_text(raw, namespace).replace(outputs_text(raw, namespace).strip(), "") + output_text(raw, index, namespace)


@lru_cache(maxsize=1024)
def requirements_text(text: str) -> str:
    """The first ``requirements:`` block in ``text``."""
    return _first_requirements(text)
