"""Which variant keys a piece of recipe text (or a build script) uses, by conda-build's rules.

A key counts as used when it appears in a Jinja expression (``{{ key }}``, ``pin_x('key')``),
an ``{% if/for/set %}``, a selector, as a bare requirement name (``- python``), through
``compiler('c')`` / ``stdlib('c')`` (``c_compiler``, ``c_compiler_version``, ``c_stdlib``...),
or as ``$key`` / ``${key}`` in a shell script. The scanners below follow conda-build's text
search (not a Jinja parse) rule by rule, quirks included, so that the keys found are the same.
"""
from __future__ import annotations

import string
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from ...text_input import read_text

_ASCII_WORD = frozenset(string.ascii_letters + string.digits + "_")
_TARGET_KINDS = ("compiler", "stdlib")
_SELECTOR_END = frozenset("=<>!]")


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _skip_blanks(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _occurrences(text: str, word: str, start: int = 0):
    position = text.find(word, start)
    while position >= 0:
        yield position
        position = text.find(word, position + 1)


def _target_parts(key: str) -> tuple[str, str] | None:
    """``cxx_compiler_version`` -> ("cxx", "compiler"); None for keys that are not compiler/stdlib keys."""
    base = key[:-len("_version")] if key.endswith("_version") else key
    for kind in _TARGET_KINDS:
        suffix = "_" + kind
        if base.endswith(suffix) and len(base) > len(suffix) - 1:
            return base[:-len(suffix)], kind
    return None


def _calls_target(line: str, language: str, kind: str) -> bool:
    """``{ compiler('c') ... }``: the call, then a ``}`` before any other ``{``."""
    for brace in _occurrences(line, "{"):
        call = _skip_blanks(line, brace + 1)
        if not line.startswith(kind + "(", call):
            continue
        quote = call + len(kind) + 1
        if line[quote:quote + 1] not in ("'", '"') or not line.startswith(language, quote + 1):
            continue
        after = quote + 1 + len(language)
        if line[after:after + 1] not in ("'", '"'):
            continue
        closing, opening = line.find("}", after + 1), line.find("{", after + 1)
        if closing >= 0 and (opening < 0 or closing < opening):
            return True
    return False


def _in_expression(line: str, key: str) -> bool:
    """``{ key ...}}`` or ``{ pin_xxx('key' ...}}``: key then a non-identifier character."""
    for brace in _occurrences(line, "{"):
        first = _skip_blanks(line, brace + 1)
        starts = [first]
        if line.startswith("pin_", first):
            name_end = first + 4
            while name_end < len(line) and line[name_end] in string.ascii_lowercase:
                name_end += 1
            if name_end > first + 4 and line[name_end:name_end + 1] == "(":
                quote = _skip_blanks(line, name_end + 1)
                if line[quote:quote + 1] in ("'", '"'):
                    starts.append(quote + 1)
        for start in starts:
            end = start + len(key)
            if (line.startswith(key, start) and end < len(line) and line[end] not in _ASCII_WORD
                    and line.find("}}", end + 1) >= 0):
                return True
    return False


def _bare_requirement(line: str, key: str) -> bool:
    """``  - key`` with nothing after it but blanks, or blanks and a ``[``/``#``; ``_`` may be ``-``."""
    dash = _skip_blanks(line, 0)
    if dash == 0 or not line.startswith("-", dash):
        return False
    name = _skip_blanks(line, dash + 1)
    if name == dash + 1:
        return False
    position = name
    for index, part in enumerate(key.split("_")):
        if index:
            if line[position:position + 1] not in ("-", "_"):
                return False
            position += 1
        if not line.startswith(part, position):
            return False
        position += len(part)
    after = _skip_blanks(line, position)
    return after == len(line) or (after > position and line[after] in "[#")


def _statement_starts(line: str):
    """Where the keyword of each ``{% ...`` begins (a ``{%`` right after ``{`` does not count)."""
    for opening in _occurrences(line, "{%"):
        if opening == 0 or line[opening - 1] != "{":
            yield _skip_blanks(line, opening + 2)


def _closes_statement(line: str, position: int) -> bool:
    """The first ``%`` from ``position`` on is the start of ``%}``."""
    percent = line.find("%", position)
    return percent >= 0 and line[percent + 1:percent + 2] == "}"


def _followed_by_identifier(line: str, position: int) -> bool:
    return position < len(line) and line[position] in _ASCII_WORD


def _in_statement(line: str, key: str) -> bool:
    """``{% if ... key %}``, ``{% for ... in key %}`` or ``{% set ... = ... key %}``."""
    for word in _statement_starts(line):
        if line.startswith("if", word) or line.startswith("elif", word):
            body = word + (2 if line.startswith("if", word) else 4)
            if any(_closes_statement(line, at + len(key)) for at in _occurrences(line, key, body)):
                return True
        if line.startswith("for", word):
            for in_at in _occurrences(line, "in", word + 3):
                at = _skip_blanks(line, in_at + 2)
                end = at + len(key)
                if line.startswith(key, at) and not _followed_by_identifier(line, end) \
                        and _closes_statement(line, end):
                    return True
        if line.startswith("set", word):
            equals = line.find("=", word + 3)
            if equals >= 0 and any(
                    not _followed_by_identifier(line, at + len(key)) and _closes_statement(line, at + len(key))
                    for at in _occurrences(line, key, equals + 1)):
                return True
    return False


def _in_selector(line: str, key: str) -> bool:
    """``... # [expr]`` or ``... [expr]`` (the first ``#``/``[`` of the line) naming ``key`` as a word."""
    hashes, brackets = line.find("#"), line.find("[")
    first = min(p for p in (hashes, brackets, len(line)) if p >= 0)
    if first == len(line):
        return False
    if line[first] == "[":
        if first == 0 or not line[first - 1].isspace():
            return False
        opening = first
    else:
        if not (line[first + 1:first + 2].isspace() and line[first + 2:first + 3] == "["):
            return False
        opening = first + 2
    closing = line.find("]", opening + 1)
    limit = closing if closing >= 0 else len(line)
    for at in _occurrences(line, key, opening + 1):
        if at >= limit:
            break
        end = at + len(key)
        if not _is_word(line[at - 1]) and end < len(line) and (line[end] in _SELECTOR_END or line[end].isspace()):
            return True
    return False


def _line_uses(line: str, key: str, target: tuple[str, str] | None) -> bool:
    if target and _calls_target(line, target[0], target[1]):
        return True
    return _in_expression(line, key) or _bare_requirement(line, key) or _in_statement(line, key)


@lru_cache(maxsize=4096)
def used_in_text(keys: tuple[str, ...], text: str, selectors_only: bool = False) -> frozenset[str]:
    """The subset of ``keys`` that ``text`` uses."""
    lines = text.splitlines()
    used = set()
    for key in keys:
        target = None if selectors_only else _target_parts(key)
        if target:
            candidates = [line for line in lines if key in line or target[0] in line]
        else:
            candidates = [line for line in lines if key in line.replace("-", "_")]
        if selectors_only:
            hit = any(_in_selector(line, key) for line in candidates)
        else:
            hit = any(_line_uses(line, key, target) for line in candidates)
        if hit:
            used.add(key)
            if key in ("c_stdlib", "c_compiler", "cxx_compiler") and "CONDA_BUILD_SYSROOT" in keys:
                used.add("CONDA_BUILD_SYSROOT")
    return frozenset(used)


@lru_cache(maxsize=256)
def _script_text(path: str) -> str:
    return read_text(Path(path))


def _first_dollars(text: str) -> list[int]:
    """The first ``$`` at or after each line start (conda-build looks at no other ``$``)."""
    dollars = []
    line_start = 0
    while True:
        dollar = text.find("$", line_start)
        if dollar < 0:
            return dollars
        dollars.append(dollar)
        newline = text.find("\n", dollar)
        if newline < 0:
            return dollars
        line_start = newline + 1


def _script_names(text: str, key: str, dollars: list[int]) -> bool:
    for dollar in dollars:
        at = dollar + 1
        if text[at:at + 1] == "{":
            at += 1
        at = _skip_blanks(text, at)
        if not text.startswith(key, at):
            continue
        end = at + len(key)
        after = _skip_blanks(text, end)
        if after > end or text[end:end + 1] in ("|", "}"):
            return True
    return False


def used_in_shell_script(keys: Iterable[str], path: Path) -> set[str]:
    """Keys referenced as ``$key`` or ``${key}`` in a shell script (none if it does not exist)."""
    if not path.is_file():
        return set()
    text = _script_text(str(path))
    dollars = _first_dollars(text)
    return {key for key in keys if key in text and _script_names(text, key, dollars)}
def _requirement_names(section: Any) -> set[str]:
    return {str(req).split()[0].replace("-", "_") for req in (section or []) if req}


def drop_run_only(used: set[str], requirements: Mapping[str, Any], variant: Mapping[str, Any]) -> set[str]:
    """conda-build ignores keys that only name run requirements (and build-only ones it is told to)."""
    build = _requirement_names(requirements.get("build"))
    host = _requirement_names(requirements.get("host"))
    run = [str(r) for r in (requirements.get("run") or [])]
    ignore_build_only = set(variant.get("ignore_build_only_deps") or [])
    drop = set()
    for key in used:
        if key in run:
            if key not in build and key not in host:
                drop.add(key)
        elif key in build and key not in host and key in ignore_build_only:
            drop.add(key)
    return used - drop
