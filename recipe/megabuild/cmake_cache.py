"""A typed, lossless model of CMake's ``CMakeCache.txt``.

The file is kept as its original lines; entries (``KEY:TYPE=VALUE``, ``"KEY":TYPE=VALUE`` for
keys with colons) are parsed into typed records that point at their line. Writing back an
unchanged cache reproduces the input byte for byte (line endings, comments, ``-ADVANCED``
entries, INTERNAL entries); `set` rewrites only the line of the entry it changes.

A file that is not a cache, or one that was cut off (a last line without its newline, a line
that is neither comment nor entry), is refused with one line that says which line and what to
do: the driver never patches a cache it does not fully understand.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import MegabuildError
from .files import write_atomically

HEADER = "# This is the CMakeCache file."
_TYPED = re.compile(r'^(?:"(?P<qkey>[^"]*)"|(?P<key>[^:="]+)):(?P<type>[A-Z_]*)=(?P<value>.*)$')
_UNTYPED = re.compile(r'^(?:"(?P<qkey>[^"]*)"|(?P<key>[^:="]+))=(?P<value>.*)$')


@dataclass(frozen=True)
class CacheEntry:
    key: str
    type: str | None  # None for the rare untyped `KEY=VALUE` line
    value: str
    line: int  # 0-based index into the file's lines

    def render(self) -> str:
        key = f'"{self.key}"' if ":" in self.key or "=" in self.key else self.key
        return f"{key}={self.value}" if self.type is None else f"{key}:{self.type}={self.value}"


def _split_eol(line: str) -> tuple[str, str]:
    for eol in ("\r\n", "\n", "\r"):
        if line.endswith(eol):
            return line[: -len(eol)], eol
    return line, ""


class CMakeCache:
    """The parsed cache. Mutating methods change the in-memory lines only; `write` saves."""

    def __init__(self, lines: list[str], source: str = "CMakeCache.txt") -> None:
        self._lines = lines
        self.source = source
        self._entries: dict[str, CacheEntry] = {}
        for index, raw in enumerate(lines):
            entry = self._parse_line(index, raw)
            if entry is not None:
                self._entries[entry.key] = entry

    # -- reading -----------------------------------------------------------------------------
    @classmethod
    def parse(cls, data: bytes | str, source: str = "CMakeCache.txt") -> "CMakeCache":
        if isinstance(data, bytes):
            if b"\0" in data:
                raise MegabuildError(f"{source}: contains NUL bytes, so it is not a CMake cache "
                                     "(corrupted?); re-run the configure step that wrote it")
            data = data.decode("utf-8", errors="surrogateescape")
        lines = data.splitlines(keepends=True)
        if not lines or not lines[0].startswith(HEADER):
            raise MegabuildError(f"{source}: does not start with {HEADER!r}, so it is not a "
                                 "CMakeCache.txt; point the driver at the file CMake wrote")
        if _split_eol(lines[-1])[1] == "":
            raise MegabuildError(f"{source}:{len(lines)}: last line has no newline, the cache "
                                 "is truncated; re-run the configure step that wrote it")
        return cls(lines, source)

    @classmethod
    def read(cls, path: Path) -> "CMakeCache":
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            raise MegabuildError(f"{path}: no such CMake cache; run the step that configures "
                                 "the build first") from None
        return cls.parse(data, str(path))

    def _parse_line(self, index: int, raw: str) -> CacheEntry | None:
        text, _ = _split_eol(raw)
        stripped = text.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("//"):
            return None
        match = _TYPED.match(text) or _UNTYPED.match(text)
        if match is None:
            raise MegabuildError(f"{self.source}:{index + 1}: not a cache entry ({text[:60]!r}); "
                                 "the cache is corrupted or truncated, re-run the configure step")
        key = match.group("qkey") if match.group("qkey") is not None else match.group("key")
        type_ = match.groupdict().get("type")
        return CacheEntry(key=key, type=type_, value=match.group("value"), line=index)

    # -- queries -----------------------------------------------------------------------------
    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[CacheEntry]:
        return iter(sorted(self._entries.values(), key=lambda e: e.line))

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, key: str) -> CacheEntry | None:
        return self._entries.get(key)

    def get(self, key: str) -> str:
        """The value of `key`, or a one-line error naming the key and the file."""
        entry = self._entries.get(key)
        if entry is None:
            raise MegabuildError(f"{self.source}: expected key {key!r} is missing; the cache was "
                                 "not written by the expected configure step or is truncated")
        return entry.value

    def text(self) -> str:
        return "".join(self._lines)

    def to_bytes(self) -> bytes:
        return self.text().encode("utf-8", errors="surrogateescape")

    # -- changes -----------------------------------------------------------------------------
    def set(self, key: str, value: str, type_: str | None = None) -> str | None:
        """Set `key` to `value`; returns the old value (None if the entry was added).

        An existing entry keeps its type unless `type_` is given; a new entry needs `type_`
        and is appended at the end of the file, where CMake reads it like any other.
        """
        old = self._entries.get(key)
        if old is None:
            if type_ is None:
                raise MegabuildError(f"{self.source}: cannot add {key!r} without a type")
            eol = _split_eol(self._lines[-1])[1] or "\n"
            entry = CacheEntry(key=key, type=type_, value=value, line=len(self._lines))
            self._lines.append(entry.render() + eol)
            self._entries[key] = entry
            return None
        entry = CacheEntry(key=key, type=type_ or old.type, value=value, line=old.line)
        eol = _split_eol(self._lines[old.line])[1]
        self._lines[old.line] = entry.render() + eol
        self._entries[key] = entry
        return old.value

    def remove(self, key: str) -> str:
        """Drop `key` (its line goes; the comment CMake wrote above it may stay, as CMake
        itself leaves it); returns the old value. A missing key is a one-line error."""
        old = self.get(key)
        entry = self._entries.pop(key)
        self._lines[entry.line] = ""
        return old

    def write(self, path: Path) -> None:
        """Write atomically: a temporary file in the same folder, then rename over `path`."""
        write_atomically(Path(path), self.to_bytes())
