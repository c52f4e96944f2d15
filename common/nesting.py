"""How deeply a text nests, counted in one linear pass before any parser recurses on it.

Python's compile() (a selector), tomllib and json recurse once per nesting level: a selector of
a few thousand `not `s, a pyproject.toml of 600 `[`s or a repodata.json of 100000 `[`s end in a
RecursionError (or the C stack) instead of one line. Every input gets YAML's limit, MAX_DEPTH.
Standard library only: build-locally reads pyproject.toml and repodata.json with it.
"""
from __future__ import annotations

import re

MAX_DEPTH = 64  # nesting levels; the deepest input here (a recipe's outputs) has about 8

# a string (its brackets do not count) or a comment; an unterminated string runs to the end of
# its line (or of the text, for TOML's triple quotes); written without nested repeats (linear)
_SKIPPED = (r'"""[\s\S]*?(?:"""|\Z)|' r"'''[\s\S]*?(?:'''|\Z)|"
            r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|' r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'?|#[^\n]*")
_SKIP = re.compile(_SKIPPED)
_BRACKET = re.compile(r"[\[\]{}()]")
_TOKEN = re.compile(_SKIPPED + r'|(?P<open>[\[{(])|(?P<close>[\]})])|(?P<unary>\*\*|[-+~])|(?P<newline>\n)'
                    r'|(?P<word>\w+)|[^\w"\'#\[\]{}()\n+~*-]+|\*')
_NESTING_WORDS = frozenset({"not", "if"})


def too_deep(text: str, limit: int = MAX_DEPTH, *, operators: bool = False) -> int | None:
    """The line (1-based) where `text` first nests more than `limit` levels of brackets, braces
    and parentheses, or None. With `operators` (a Python expression), each `not`, unary sign,
    `**` and `if` counts as a level too, for good: the parser nests on chains of them, and no
    real selector holds more than a few."""
    if not operators and not _deeper_than(text, limit):
        return None  # the usual answer, at the regex engine's speed (a 23 MB repodata.json: 0.7 s)
    depth = extra = 0
    line = 1
    for token in _TOKEN.finditer(text):
        kind = token.lastgroup
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif kind == "unary" or (kind == "word" and token.group() in _NESTING_WORDS):
            extra += operators
        elif kind == "newline":
            line += 1
            continue
        elif kind == "word" or token.group()[:1] not in "\"'#":
            continue  # a word or a run of anything else
        else:  # a string or a comment: count the lines it spans
            line += token.group().count("\n")
            continue
        if depth + extra > limit:
            return line
    return None


def _deeper_than(text: str, limit: int) -> bool:
    """Whether the brackets outside strings and comments nest more than `limit` deep."""
    if text.count("[") + text.count("{") + text.count("(") <= limit:
        return False
    depth = 0
    for bracket in _BRACKET.finditer(_SKIP.sub("", text)):
        depth = depth + 1 if bracket.group() in "[{(" else max(depth - 1, 0)
        if depth > limit:
            return True
    return False


def depth_refusal(text: str, label: str, *, operators: bool = False) -> str | None:
    """None when `text` is within MAX_DEPTH, else the one-line reason: `LABEL:LINE: nested ...`."""
    line = too_deep(text, operators=operators)
    if line is None:
        return None
    return f"{label}:{line}: nested more than {MAX_DEPTH} levels deep, the limit for an input file"
