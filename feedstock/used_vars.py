"""Which variant keys a piece of recipe text (or a build script) uses, by conda-build's rules.

A key counts as used when it appears in a Jinja expression (``{{ key }}``, ``pin_x('key')``),
an ``{% if/for/set %}``, a selector, as a bare requirement name (``- python``), through
``compiler('c')`` / ``stdlib('c')`` (``c_compiler``, ``c_compiler_version``, ``c_stdlib``...),
or as ``$key`` / ``${key}`` in a shell script.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

_TARGET_KEY_RE = re.compile(r"(.*?)_(compiler|stdlib)(_version)?$")


@lru_cache(maxsize=None)
def _patterns(key: str, selectors_only: bool) -> tuple[re.Pattern, tuple[str, ...]]:
    """One combined pattern for ``key`` and the substrings a line must contain to be searched."""
    k = re.escape(key)
    if selectors_only:
        # the key inside a "[...]" selector, as a whole word
        pattern = rf"^[^#\[]*?\#?\s\[[^\]]*?(?<![_\w\d]){k}[=\s<>!\]]"
        return re.compile(pattern), (key,)
    alternatives = []
    needles: tuple[str, ...] = (key,)
    target = _TARGET_KEY_RE.match(key)
    if target:
        language, kind = target.group(1), target.group(2)
        alternatives.append(rf"\{{\s*{kind}\([\'\"]{re.escape(language)}[\"\'][^\{{]*?\}}")
        needles = (key, language)
    requirement_name = "[-_]".join(map(re.escape, key.split("_")))
    alternatives += [
        rf"\{{\s*(?:pin_[a-z]+\(\s*?['\"])?{k}[^_0-9a-zA-Z].*?\}}\}}",      # {{ key }}, pin_x('key')
        rf"^\s+\-\s+{requirement_name}\s*(?:\s[\[#]|$)",                   # "- key" requirement
        rf"(?:^|[^\{{])\{{%\s*(?:el)?if\s*.*{k}\s*(?:[^%]*?)?%\}}",         # {% if ... key %}
        rf"(?:^|[^\{{])\{{%\s*for\s*.*\s*in\s*{k}(?![a-zA-Z_0-9])(?:[^%]*?)?%\}}",
        rf"(?:^|[^\{{])\{{%\s*set\s*.*\s*=\s*.*{k}(?![a-zA-Z_0-9])(?:[^%]*?)?%\}}",
    ]
    return re.compile("|".join(alternatives)), needles


@lru_cache(maxsize=4096)
def used_in_text(keys: tuple[str, ...], text: str, selectors_only: bool = False) -> frozenset[str]:
    """The subset of ``keys`` that ``text`` uses."""
    lines = text.splitlines()
    used = set()
    for key in keys:
        pattern, needles = _patterns(key, selectors_only)
        if len(needles) == 1 and not selectors_only:
            candidates = [line for line in lines if key in line.replace("-", "_")]
        elif selectors_only:
            candidates = [line for line in lines if key in line.replace("-", "_")]
        else:
            candidates = [line for line in lines if any(n in line for n in needles)]
        if any(pattern.search(line) for line in candidates):
            used.add(key)
            if key in ("c_stdlib", "c_compiler", "cxx_compiler") and "CONDA_BUILD_SYSROOT" in keys:
                used.add("CONDA_BUILD_SYSROOT")
    return frozenset(used)


@lru_cache(maxsize=256)
def _script_text(path: str) -> str:
    return Path(path).read_text()


def used_in_shell_script(keys: Iterable[str], path: Path) -> set[str]:
    """Keys referenced as ``$key`` or ``${key}`` in a shell script (none if it does not exist)."""
    if not path.is_file():
        return set()
    text = _script_text(str(path))
    return {
        key for key in keys
        if key in text and re.search(rf"(^[^$]*?\$\{{?\s*{re.escape(key)}\s*[\s|\}}])", text, re.M | re.S)
    }


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
