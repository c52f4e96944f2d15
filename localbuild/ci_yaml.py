"""Reader for the YAML subset that conda-smithy writes into ``.ci_support/<config>.yaml``.

Supported: block mappings, block sequences (indented or at the key's indentation, nested
``- - a``), plain / 'single' / "double" quoted scalars, flow lists ``[a, b]``, ``{}``/``[]``,
comments. Scalars stay strings (conda-build turns variant values into strings anyway).
Anything else (anchors, tags, block scalars, multi-document files), or nesting deeper than
`MAX_DEPTH` (conda-smithy writes two levels), is an error naming the line. The file is read
bounded (`input_files`): a FIFO, a device or a huge file is refused before it is read.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.input_files import decode_text, read_regular

MAX_DEPTH = 16  # nested blocks; a .ci_support file has two (a key's list, zip_keys' groups)


class CiYamlError(ValueError):
    """Unparseable file: message is ``<path> line <n>: <reason>``."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path} line {line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@dataclass
class CiYaml:
    """A parsed config file.

    ``item_lines`` maps each top-level key whose value is a block sequence to the
    (first, last) 1-based line numbers of every item, so that a derived copy can drop items
    while keeping every other byte of the file as conda-smithy wrote it.
    """

    data: dict[str, Any]
    lines: list[str]
    item_lines: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


@dataclass
class _Line:
    number: int
    indent: int
    text: str


_UNSUPPORTED_START = {"&": "anchors", "*": "aliases", "!": "tags", "|": "block scalars",
                      ">": "block scalars", "%": "directives", "@": "reserved '@'",
                      "`": "reserved '`'"}


def load(path: Path) -> CiYaml:
    """Parse one ``.ci_support`` file; raises CiYamlError (or OSError) on failure."""
    text = decode_text(read_regular(path), str(path))
    return parse(text, str(path))


def parse(text: str, path: str = "<string>") -> CiYaml:
    lines: list[_Line] = []
    raw_lines = text.splitlines()
    for number, raw in enumerate(raw_lines, 1):
        body = _strip_comment(raw, path, number).rstrip()
        if not body.strip():
            continue
        stripped = body.lstrip(" ")
        if stripped.startswith("\t"):
            raise CiYamlError(path, number, "tab in indentation (YAML allows spaces only)")
        if stripped in ("---", "...") and body == stripped:
            if stripped == "---" and not lines:
                continue
            raise CiYamlError(path, number, "more than one YAML document")
        lines.append(_Line(number, len(body) - len(stripped), stripped))
    result = CiYaml(data={}, lines=raw_lines)
    if not lines:
        return result
    parser = _Parser(lines, path, result.item_lines)
    if lines[0].indent != 0 or _is_sequence_item(lines[0].text):
        raise CiYamlError(path, lines[0].number, "expected 'key:' at the start of a line")
    result.data = parser.mapping(0, top_level=True)
    if parser.pos < len(lines):
        line = lines[parser.pos]
        raise CiYamlError(path, line.number, "unexpected indentation")
    return result


class _Parser:
    def __init__(self, lines: list[_Line], path: str,
                 item_lines: dict[str, list[tuple[int, int]]]) -> None:
        self.lines = lines
        self.path = path
        self.pos = 0
        self.item_lines = item_lines
        self.depth = 0  # blocks open: bounded, so deep nesting is one error, not a RecursionError

    def error(self, line: _Line, reason: str) -> CiYamlError:
        return CiYamlError(self.path, line.number, reason)

    def node(self, indent: int) -> Any:
        line = self.lines[self.pos]
        parse = self.sequence if _is_sequence_item(line.text) else self.mapping
        return self.nested(lambda: parse(indent), line)

    def nested(self, parse, line: _Line) -> Any:
        """parse() one level deeper; deeper than MAX_DEPTH is an error naming the line."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(line, f"nested more than {MAX_DEPTH} levels deep; .ci_support files "
                                   "hold flat lists")
        try:
            return parse()
        finally:
            self.depth -= 1

    def sequence(self, indent: int, spans: list[tuple[int, int]] | None = None) -> list[Any]:
        items: list[Any] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.indent < indent:
                break
            if line.indent > indent:
                raise self.error(line, "unexpected indentation")
            if not _is_sequence_item(line.text):
                break
            rest = line.text[1:].lstrip(" ")
            first_line = line.number
            if not rest:
                self.pos += 1
                if self.pos >= len(self.lines) or self.lines[self.pos].indent <= indent:
                    raise self.error(line, "empty list item")
                items.append(self.node(self.lines[self.pos].indent))
            elif _is_sequence_item(rest) or _split_key(rest) is not None:
                # "- - a" or "- key: v": a nested block that starts on this line
                column = indent + (len(line.text) - len(rest))
                self.lines[self.pos] = _Line(line.number, column, rest)
                items.append(self.node(column))
            else:
                items.append(self.scalar(rest, line))
                self.pos += 1
            if spans is not None:
                spans.append((first_line, self.lines[self.pos - 1].number))
        return items

    def mapping(self, indent: int, top_level: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.indent < indent:
                break
            if line.indent > indent:
                raise self.error(line, "unexpected indentation")
            if _is_sequence_item(line.text):
                if top_level:
                    raise self.error(line, "list item without a key above it")
                break
            split = _split_key(line.text)
            if split is None:
                raise self.error(line, "expected 'key: value' or 'key:'")
            raw_key, rest = split
            key = self.scalar(raw_key, line) if raw_key[:1] in "'\"" else raw_key
            if not isinstance(key, str) or not key:
                raise self.error(line, "empty key")
            if key in result:
                raise self.error(line, f"duplicate key '{key}'")
            self.pos += 1
            if rest:
                result[key] = self.scalar(rest, line)
                continue
            nxt = self.lines[self.pos] if self.pos < len(self.lines) else None
            if nxt is not None and nxt.indent >= indent and _is_sequence_item(nxt.text):
                # a block sequence, indented or at the key's indentation
                spans: list[tuple[int, int]] = []
                result[key] = self.nested(lambda: self.sequence(nxt.indent, spans), nxt)
                if top_level:
                    self.item_lines[key] = spans
            elif nxt is not None and nxt.indent > indent:
                result[key] = self.nested(lambda: self.mapping(nxt.indent), nxt)
            else:
                result[key] = None
        return result

    def scalar(self, text: str, line: _Line) -> Any:
        text = text.strip()
        if text[:1] in ("'", '"'):
            quote = text[0]
            value, end = (_single_quoted if quote == "'" else _double_quoted)(text)
            if end is None:
                raise self.error(line, f"unterminated {quote}quoted{quote} string")
            if text[end:].strip():
                raise self.error(line, f"unexpected text after quoted string: {text[end:].strip()!r}")
            return value
        if text.startswith("["):
            if not text.endswith("]"):
                raise self.error(line, "flow list must close on the same line")
            inner = text[1:-1].strip()
            if not inner:
                return []
            return [self.scalar(part, line) for part in _split_flow(inner, self.path, line.number)]
        if text.startswith("{"):
            if text.replace(" ", "") == "{}":
                return {}
            raise self.error(line, "flow mappings {...} are not supported; use block style")
        if text[0] in _UNSUPPORTED_START:
            raise self.error(line, f"{_UNSUPPORTED_START[text[0]]} are not supported in .ci_support files")
        if text.startswith("- ") or text == "-":
            raise self.error(line, "list item where a value was expected")
        return text


def _is_sequence_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _split_key(text: str) -> tuple[str, str] | None:
    """'key: value' -> ('key', 'value'); 'key:' -> ('key', ''); no mapping -> None."""
    quote = ""
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
            continue
        if char in "'\"" and index == 0:
            quote = char
            continue
        if char == ":" and (index + 1 == len(text) or text[index + 1] == " "):
            return text[:index].strip(), text[index + 1:].strip()
        if index == 0 and char in "[{":
            return None
    return None


def _strip_comment(raw: str, path: str, number: int) -> str:
    quote = ""
    for index, char in enumerate(raw):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"" and (index == 0 or raw[index - 1] in " [,:-"):
            quote = char
        elif char == "#" and (index == 0 or raw[index - 1] in " \t"):
            return raw[:index]
    return raw


def _single_quoted(text: str) -> tuple[str, int | None]:
    out = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == "'":
            if index + 1 < len(text) and text[index + 1] == "'":
                out.append("'")
                index += 2
                continue
            return "".join(out), index + 1
        out.append(char)
        index += 1
    return "", None


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "0": "\0", " ": " "}


def _double_quoted(text: str) -> tuple[str, int | None]:
    out = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            out.append(_ESCAPES.get(text[index + 1], "\\" + text[index + 1]))
            index += 2
            continue
        if char == '"':
            return "".join(out), index + 1
        out.append(char)
        index += 1
    return "", None


def _split_flow(inner: str, path: str, number: int) -> list[str]:
    parts: list[str] = []
    quote = ""
    start = 0
    for index, char in enumerate(inner):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "[]{}":
            raise CiYamlError(path, number, "nested flow collections are not supported")
        elif char == ",":
            parts.append(inner[start:index])
            start = index + 1
    parts.append(inner[start:])
    if quote:
        raise CiYamlError(path, number, "unterminated quoted string in flow list")
    parts = [part.strip() for part in parts]
    if parts and not parts[-1]:
        parts.pop()  # trailing comma
    if any(not part for part in parts):
        raise CiYamlError(path, number, "empty entry in flow list")
    return parts


def without_items(doc: CiYaml, drop: dict[str, set[int]]) -> str:
    """The file's text with the given item indices removed from top-level sequences."""
    dropped_lines: set[int] = set()
    for key, indices in drop.items():
        spans = doc.item_lines.get(key)
        if spans is None:
            raise KeyError(key)
        for index in indices:
            first, last = spans[index]
            dropped_lines.update(range(first, last + 1))
    kept = [line for number, line in enumerate(doc.lines, 1) if number not in dropped_lines]
    return "\n".join(kept) + "\n"


def with_items(doc: CiYaml, key: str, values: list[str]) -> str:
    """The file's text with the items of top-level sequence ``key`` replaced by ``values``
    (written where the first item was; every other line kept as it was)."""
    spans = doc.item_lines.get(key)
    if not spans:
        raise KeyError(key)
    first = spans[0][0]
    dropped = {number for start, end in spans for number in range(start, end + 1)}
    new = [f"- {json.dumps(value)}" for value in values]  # a JSON string is a YAML scalar
    kept: list[str] = []
    for number, line in enumerate(doc.lines, 1):
        if number == first:
            kept += new
        if number not in dropped:
            kept.append(line)
    return "\n".join(kept) + "\n"
