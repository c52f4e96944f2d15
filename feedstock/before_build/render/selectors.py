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

from common.nesting import MAX_DEPTH, too_deep

from ...errors import FeedstockError


@dataclass(frozen=True)
class SelectorLine:
    lineno: int          # 1-based line number in the source file
    text: str            # the line without its selector (comment lines: "")
    selector: str | None


@lru_cache(maxsize=256)
def split_selectors(text: str) -> tuple[SelectorLine, ...]:
    """Every line of ``text`` with its selector separated (cached: recipes are re-selected often)."""
    return tuple(SelectorLine(number, *_split_line(line)) for number, line in enumerate(text.splitlines(), start=1))


# every variant's rendered recipe repeats most of its selector lines: a long one is scanned once
@lru_cache(maxsize=4096)
def _split_line(line: str) -> tuple[str, str | None]:
    """(text, selector) of one line: comment lines blank, the selector cut off."""
    line = line.rstrip()
    if not line or line.lstrip().startswith("#"):
        return "", None
    found = _find_selector(line) if ("[" in line and "]" in line) else None
    if found is None:
        return line, None
    quote = line[-1] if line[-1] in ("'", '"') else ""
    return (found[0] + quote).rstrip(), found[1]


@dataclass(frozen=True)
class _Piece:
    """A run of lines select_lines keeps or drops together: plain lines joined, or one selector line."""
    selector: str | None
    text: str
    first: int           # 1-based line number of its first line
    count: int


@lru_cache(maxsize=256)
def _pieces(text: str) -> tuple[_Piece, ...]:
    """The lines of ``text`` as pieces: every selection of a text of many plain lines then costs
    its selector lines, not its size (lint selects each recipe for every variant)."""
    pieces: list[_Piece] = []
    plain: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.rstrip()
        # most lines are plain: only a bracket pair or a comment needs _split_line
        if not (("[" in line and "]" in line) or line.lstrip().startswith("#")):
            plain.append(line)
            continue
        line, selector = _split_line(line)
        if selector is None:
            plain.append(line)
            continue
        if plain:
            pieces.append(_Piece(None, "\n".join(plain), number - len(plain), len(plain)))
            plain = []
        pieces.append(_Piece(selector, line, number, 1))
    if plain:
        pieces.append(_Piece(None, "\n".join(plain), number - len(plain) + 1, len(plain)))
    return tuple(pieces)


# a bracketed expression without brackets inside: the only shape a selector can take
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")


def _find_selector(line: str) -> tuple[str, str] | None:
    """(text, selector) when ``line`` ends in a ``[selector]``, else None.

    The rule conda-build applies (its ``sel_pat``): the text is the shortest start of the line
    (at least one character) after which, past optional blanks, comes either ``[expr]`` closing
    the line, or a ``#`` comment holding a ``[expr]`` (the last one possible) followed only by
    text without parentheses (so a markdown link ``[x](url)`` is not a selector). ``expr`` has
    no brackets.

    One pass, linear in the line (a backtracking scan was quadratic on hostile lines). Both
    forms take the last ``[expr]`` of the line: the comment form the last one possible, and the
    plain form the one that ends the line. So only the cut differs: the first ``#`` before
    that ``[expr]`` when its tail has no parentheses, else the ``[expr]`` itself when it ends
    the line; the text ends where the blanks before that point begin.
    """
    last = None
    for last in _BRACKETED.finditer(line):   # bracketed spans never overlap: linear
        pass
    if last is None:
        return None
    opening, end = last.start(), last.end()
    # the comment form: its tail (after the "]") has no parentheses; "#" at 0 leaves no text
    plain_tail = max(line.rfind("("), line.rfind(")")) < end
    point = line.find("#", 1, opening) if plain_tail else -1
    if point < 0:
        if end != len(line) or opening < 1:
            return None
        point = opening
    # the text is at least one character, even when the line starts with blanks
    cut = max(1, len(line[:point].rstrip()))
    return line[:cut], last.group(1)


# the few builtins a selector may reasonably call
_BUILTINS = {"int": int, "str": str, "float": float, "len": len, "bool": bool}


@lru_cache(maxsize=1024)
def _compile(selector: str):
    # compile() recurses per level (a few thousand `not `s: RecursionError): refused before it
    if too_deep(selector, operators=True):
        raise SyntaxError(f"nested more than {MAX_DEPTH} levels deep, the limit for an expression")
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


def select_lines(text: str, namespace: Mapping[str, Any], source: str = "",
                 kept_linenos: list[int] | None = None) -> str:
    """``text`` with the lines whose selector is false removed (comments blanked).

    ``kept_linenos``, when given, receives the original line number of every kept line (so an
    error found in the selected text can name the line of the file).
    """
    kept: list[str] = []
    cache: dict[str, bool] = {}
    for piece in _pieces(text):
        if piece.selector is not None:
            if piece.selector not in cache:
                cache[piece.selector] = evaluate(piece.selector, namespace, f"{source}:{piece.first}")
            if not cache[piece.selector]:
                continue
        kept.append(piece.text)
        if kept_linenos is not None:
            kept_linenos.extend(range(piece.first, piece.first + piece.count))
    return "\n".join(kept) + "\n"
