"""Reading a file the user gave or keeps (recipe, config, catalog, repodata): text, YAML or JSON,
or one clear error.

The tools' one reader of input files:
- every input is UTF-8 text; a UTF-8 BOM is dropped (it means the same text), a byte that is not
  UTF-8 (a Latin-1 `é`, a UTF-16 file, binary junk) is an error naming the file and the line;
- a folder, a symlink loop or an unreadable file where a file belongs is an error, never a
  traceback and never "absent"; only a path that does not exist at all raises
  FileNotFoundError, so that callers can decide what absent means;
- YAML refuses a key given twice in one mapping (YAML itself keeps the last one without a word);
- the size and shape are bounded before anything is parsed: only a regular file is read (a FIFO
  would block forever, `/dev/zero` fill the memory; `common.input_files` opens it), at most
  `MAX_INPUT_BYTES`; YAML nested at most `MAX_DEPTH` deep (PyYAML's C loader overflows its
  stack on deep nesting and the process dies without a word); anchors and aliases are refused
  where a file never needs them, and elsewhere (`aliases=True`: the recipe) bounded to
  `MAX_EXPANDED_NODES` once expanded (a "billion laughs" file).
"""
from __future__ import annotations

import copy
import errno
import functools
import json
import os
from pathlib import Path
from typing import Any, Sequence

import yaml
from common.input_files import MAX_INPUT_BYTES, NotARegularFile, NotUtf8Text, decode_text, read_regular
from common.nesting import MAX_DEPTH, depth_refusal

from .errors import FeedstockError

MAX_EXPANDED_NODES = 1_000_000  # nodes of a YAML file with its aliases expanded


class UnreadableInput(FeedstockError):
    """An input file that cannot be read as what it should be (not a file, not UTF-8, not valid
    YAML or JSON, a key twice): the command stops; lint too, since it cannot lint what it cannot
    read."""


def read_bytes(path: Path, label: str | None = None) -> bytes:
    """The file's bytes; FileNotFoundError only when nothing is at the path."""
    label = label or str(path)
    path = Path(path)
    try:
        return read_regular(path, MAX_INPUT_BYTES)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise UnreadableInput(f"{label} is a symbolic link to nothing ({os.readlink(path)}); "
                                 "point it at the file or remove it") from None
        raise
    except IsADirectoryError:
        raise UnreadableInput(f"{label} is a folder; a file belongs there") from None
    except PermissionError:
        raise UnreadableInput(f"cannot read {label}: permission denied; check its mode") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnreadableInput(f"{label} is a symbolic link loop; point it at a file") from None
        if isinstance(err, NotARegularFile) and err.errno in (errno.EFBIG, errno.ETIMEDOUT):
            raise UnreadableInput(f"{label} is {err.strerror}; is it the file you meant?") from None
        if isinstance(err, NotARegularFile):
            raise UnreadableInput(f"{label} is {err.strerror}; a file belongs there") from None
        raise UnreadableInput(f"cannot read {label}: {err.strerror}") from None


def read_text(path: Path, label: str | None = None) -> str:
    """The file's text (UTF-8, a BOM dropped); anything else is one error line (exit 2)."""
    label = label or str(path)
    try:
        return decode_text(read_bytes(path, label), label)
    except NotUtf8Text as err:
        raise UnreadableInput(f"{err}; save the file as UTF-8") from None


def read_compared(path: Path, label: str | None = None) -> str:
    """A generated file's text, to compare with what it should be: read as every input is
    (bounded), a byte that is not UTF-8 replaced (such a file is simply stale)."""
    return read_bytes(path, label).decode("utf-8", errors="replace")


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: str, line: int, first_line: int) -> None:
        super().__init__(f"key {key!r} is given twice")
        self.key, self.line, self.first_line = key, line, first_line


class _UniqueKeys:
    def construct_mapping(self, node, deep=False):
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            key = str(self.construct_object(key_node, deep=deep))
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKeyError(key, line, seen[key])
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


class StringLoader(_UniqueKeys, getattr(yaml, "CBaseLoader", yaml.BaseLoader)):
    """Every scalar a string ('3.10' stays '3.10'), as conda-build reads variant configs."""


class TypedLoader(_UniqueKeys, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """YAML's safe types (true, 360, 3.10 as numbers)."""


class _ShapeError(yaml.YAMLError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


_EventLoader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)


def check_shape(text: str, aliases: bool = False) -> None:
    """Walk the YAML events (an explicit stack, no recursion) and refuse, before anything is
    composed: nesting deeper than MAX_DEPTH; anchors and aliases unless `aliases`; more than
    MAX_EXPANDED_NODES nodes once the aliases are expanded. Linear in the text."""
    depth = 0
    nodes = 0
    sizes: dict[str, int] = {}  # anchor -> its node's size, aliases inside expanded
    open_nodes: list[tuple[str | None, int]] = []  # collections being read: (anchor, nodes before)
    for event in yaml.parse(text, Loader=_EventLoader):
        line = event.start_mark.line + 1 if event.start_mark else 1
        anchor = getattr(event, "anchor", None)
        if isinstance(event, yaml.AliasEvent) or (anchor and isinstance(event, yaml.NodeEvent)):
            if not aliases:
                raise _ShapeError(line, "anchors and aliases (&, *) are not allowed in this file; "
                                        "write the values out")
        if isinstance(event, yaml.AliasEvent):
            nodes += sizes.get(event.anchor, 1)
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise _ShapeError(line, f"nested more than {MAX_DEPTH} levels deep, the limit "
                                        "for an input file")
            open_nodes.append((anchor, nodes))
            nodes += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            opened, before = open_nodes.pop()
            if opened:
                sizes[opened] = nodes - before
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if anchor:
                sizes[anchor] = 1
        if nodes > MAX_EXPANDED_NODES:
            raise _ShapeError(line, f"more than {MAX_EXPANDED_NODES} values once its aliases are "
                                    "expanded, the limit for an input file")


@functools.lru_cache(maxsize=1024)
def _parsed(text: str, strings: bool, aliases: bool) -> Any:
    """The parse of a text, kept: lint renders one recipe for every variant of every job, and
    two in three of those texts are ones it has parsed before. Refusals are raised each time
    (lru_cache keeps only results); callers get a deep copy to change as they like."""
    check_shape(text, aliases)
    return yaml.load(text, Loader=StringLoader if strings else TypedLoader)


def _copied(value: Any) -> Any:
    """A copy of parsed YAML for a caller to change: new dicts and lists all the way down, the
    same immutable scalars (three times faster than copy.deepcopy, which the odd rest gets)."""
    if type(value) is dict:
        return {key: _copied(item) for key, item in value.items()}
    if type(value) is list:
        return [_copied(item) for item in value]
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return copy.deepcopy(value)


def load_yaml(text: str, label: str, *, strings: bool = False, line_map: Sequence[int] | None = None,
              context: str = "", aliases: bool = False) -> Any:
    """YAML of one input file. ``line_map[n-1]`` is the file's line of the text's line n (when
    selectors removed lines first); ``context`` ends each message (" on linux-64");
    ``aliases`` allows anchors and aliases (bounded, see check_shape)."""
    def original(line: int) -> int:
        return line_map[line - 1] if line_map and 0 < line <= len(line_map) else line

    try:
        return _copied(_parsed(text, strings, aliases))
    except _ShapeError as err:
        raise UnreadableInput(f"{label}:{original(err.line)}: {err.message}{context}") from None
    except DuplicateKeyError as err:
        raise UnreadableInput(f"{label}:{original(err.line)}: key '{err.key}' is given twice (first at "
                             f"line {original(err.first_line)}){context}; YAML would keep the last one "
                             "silently: remove one or give them exclusive selectors") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{label}:{original(mark.line + 1)}" if mark else label
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UnreadableInput(f"{where}: invalid YAML ({problem}){context}; fix the file") from None


def read_yaml(path: Path, label: str | None = None, *, strings: bool = False) -> Any:
    """read_text, then load_yaml."""
    label = label or str(path)
    return load_yaml(read_text(path, label), label, strings=strings)


def read_json(path: Path, label: str | None = None) -> Any:
    """A JSON input file (repodata.json, a package record): its data, or one error line."""
    label = label or str(path)
    text = read_text(path, label)
    return load_json(text, label)


def load_json(text: str, label: str, fix: str = "rewrite or re-index the file") -> Any:
    """JSON of one input file, its depth checked before the parser recurses; one line otherwise
    that ends with `fix`."""
    refusal = depth_refusal(text, label)
    if refusal:
        raise UnreadableInput(f"{refusal}; {fix}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UnreadableInput(f"{label}:{err.lineno}: not valid JSON ({err.msg}); {fix}") from None
