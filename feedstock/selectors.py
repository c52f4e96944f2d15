"""Line selectors (``- foo  # [linux and not aarch64]``): find them, check them, apply them.

Semantics follow conda-build: a selector is a bracketed expression at the end of a line
(optionally after ``#``); comment lines become blank; a name the namespace does not define
counts as False. The expression language is Python's, evaluated without builtins.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from .errors import FeedstockError

# text, optional "#...", then "[selector]" at the end (a "(...)" after it would be a markdown link)
_SELECTOR_RE = re.compile(r"(.+?)\s*(#.*)?\[([^\[\]]+)\](?(2)[^\(\)]*)$")


@dataclass(frozen=True)
class SelectorLine:
    lineno: int          # 1-based line number in the source file
    text: str            # the line without its selector (comment lines: "")
    selector: str | None


@lru_cache(maxsize=256)
def split_selectors(text: str) -> tuple[SelectorLine, ...]:
    """Every line of ``text`` with its selector separated (cached: recipes are re-selected often)."""
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.rstrip()
        if not line or line.lstrip().startswith("#"):
            lines.append(SelectorLine(number, "", None))
            continue
        quote = line[-1] if line[-1] in ("'", '"') else ""
        match = _SELECTOR_RE.match(line) if ("[" in line and "]" in line) else None
        if match and match.group(3):
            lines.append(SelectorLine(number, (match.group(1) + quote).rstrip(), match.group(3)))
        else:
            lines.append(SelectorLine(number, line, None))
    return tuple(lines)


# the few builtins a selector may reasonably call
_BUILTINS = {"int": int, "str": str, "float": float, "len": len, "bool": bool}


@lru_cache(maxsize=1024)
def _compile(selector: str):
    return compile(selector.strip(), "<selector>", "eval")


def check_selector(selector: str) -> str | None:
    """None when ``selector`` parses as an expression, else the parser's complaint."""
    try:
        _compile(selector)
    except SyntaxError as err:
        return err.msg
    return None


def selector_names(selector: str) -> set[str]:
    """The bare names a (parseable) selector reads, e.g. ``{"linux", "cuda_compiler_version"}``."""
    tree = ast.parse(selector.strip(), mode="eval")
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def evaluate(selector: str, namespace: Mapping[str, Any], where: str = "") -> bool:
    """Truth of one selector; unknown names are False (as in conda-build)."""
    try:
        code = _compile(selector)
    except SyntaxError as err:
        raise FeedstockError(f"{where}: selector [{selector}] does not parse ({err.msg}); "
                             "fix the expression, e.g. [linux and x86_64]")
    # names the namespace lacks read as False; attribute names in co_names are harmless here
    scope = {name: False for name in code.co_names if name not in namespace}
    scope.update(namespace)
    try:
        return bool(eval(code, {"__builtins__": _BUILTINS}, scope))
    except Exception as err:  # a selector is user code: report any failure as one line
        raise FeedstockError(f"{where}: selector [{selector}] fails ({type(err).__name__}: {err}); "
                             "fix the expression")


def select_lines(text: str, namespace: Mapping[str, Any], source: str = "") -> str:
    """``text`` with the lines whose selector is false removed (comments blanked)."""
    kept = []
    cache: dict[str, bool] = {}
    for line in split_selectors(text):
        if line.selector is None:
            kept.append(line.text)
            continue
        if line.selector not in cache:
            cache[line.selector] = evaluate(line.selector, namespace, f"{source}:{line.lineno}")
        if cache[line.selector]:
            kept.append(line.text)
    return "\n".join(kept) + "\n"
