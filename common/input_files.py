"""Opening a file the user gave, bounded: only a regular file, and no more than a limit.

A FIFO would block the reader forever and a device (`/dev/zero`, or a symlink to it) would feed
it until memory ran out, so the file is opened without blocking and its kind checked on the
open descriptor (no window between a check and the open). Refusals are OSErrors whose strerror
says what the path is (a folder: IsADirectoryError; anything else: NotARegularFile), so every
caller's `except OSError` already turns them into its one line.
Standard library only: build-locally runs with a bare python3.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

# Every combination of a variant matrix is rendered (about 10 ms each): the feedstock's largest
# platform has 96; nine keys of nine values would be 387 million, a hang. Shared by the feedstock's
# renderer and build-locally's reader of job files.
MAX_VARIANTS = 2048
MAX_INPUT_BYTES = 64 << 20  # a config, recipe or note: kilobytes; 64 MiB is far beyond any

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotARegularFile(OSError):
    """What open_regular and read_regular refuse; strerror says what the path is instead."""


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for binary reading; an OSError when it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # what open(2) says for a socket
            raise NotARegularFile(errno.ENXIO, "a socket, not a regular file", str(path)) from None
        raise
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        os.close(fd)  # the error open(2) gives for writing to a folder, which callers know
        raise IsADirectoryError(errno.EISDIR, "a folder, not a regular file", str(path))
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise NotARegularFile(errno.EINVAL, f"{kind}, not a regular file", str(path))
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; an OSError otherwise."""
    with open_regular(path) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise NotARegularFile(errno.EFBIG, f"larger than {limit >> 20} MiB, the limit for this file", str(path))
    return data


class NotUtf8Text(ValueError):
    """Bytes that are not UTF-8 text; str() is `LABEL:LINE: byte 0x.. is not UTF-8 text`."""


def decode_text(data: bytes, label: str) -> str:
    """UTF-8 text, a BOM dropped (it means the same text): the one decoding of every input."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise NotUtf8Text(f"{label}:{line}: byte 0x{data[err.start]:02x} is not UTF-8 text") from None


def too_many_variants(axes: list[tuple[str, int]]) -> str | None:
    """None when the product of the axes' value counts (a key, or a zip_keys group as `a/b`, and
    its number of values) is within MAX_VARIANTS; else the part of the one-line refusal both the
    renderer and build-locally give: the count, the limit and the widest keys."""
    size = 1
    for _, count in axes:
        size *= max(count, 1)
    if size <= MAX_VARIANTS:
        return None
    widest = sorted((axis for axis in axes if axis[1] > 1), key=lambda axis: -axis[1])
    named = " x ".join(f"{key} ({count} values)" for key, count in widest[:6])
    more = f" x {len(widest) - 6} more keys" if len(widest) > 6 else ""
    return f"{size:,} combinations (the limit is {MAX_VARIANTS:,}), from {named}{more}"
