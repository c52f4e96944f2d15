"""Opening a file the user gave, bounded: only a regular file, and no more than a limit.

A FIFO would block the reader forever and a device (`/dev/zero`, or a symlink to it) would feed
it until memory ran out, so the file is opened without blocking and its kind checked on the
open descriptor (no window between a check and the open). A file of a pseudo-filesystem
(/proc, /sys, /dev) is refused by where it is: some report S_ISREG and block once drained
(/proc/kmsg, a tracing pipe), and reading one consumes it. What is read is read against a size
limit and a deadline (READ_DEADLINE), so no input can hold a command forever. Refusals are
OSErrors whose strerror says what the path is (a folder: IsADirectoryError; anything else:
NotARegularFile), so every caller's `except OSError` already turns them into its one line.
Standard library only: build-locally runs with a bare python3.
"""
from __future__ import annotations

import errno
import functools
import os
import select
import stat
import time
from pathlib import Path
from typing import BinaryIO

from .mounts import Mount, mount_of, mounts

# Every combination of a variant matrix is rendered (about 10 ms each): the feedstock's largest
# platform has 96; nine keys of nine values would be 387 million, a hang. Shared by the feedstock's
# renderer and build-locally's reader of job files.
MAX_VARIANTS = 2048
MAX_INPUT_BYTES = 64 << 20  # a config, recipe or note: kilobytes; 64 MiB is far beyond any

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


READ_DEADLINE = 30.0  # seconds one input may take to read: 64 MiB from a local disk takes < 1 s

# filesystems whose files are the kernel's answers, not stored bytes: they may never end
PSEUDO_FILESYSTEMS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs", "configfs", "cgroup",
    "cgroup2", "bpf", "pstore", "efivarfs", "fusectl", "mqueue", "binfmt_misc", "autofs", "nsfs",
    "rpc_pipefs", "hugetlbfs"})
# where they live; /dev's own mount (a container's /dev is a tmpfs) counts, /dev/shm's does not
PSEUDO_PLACES = ("/proc", "/sys", "/dev")


class NotARegularFile(OSError):
    """What open_regular and read_regular refuse; strerror says what the path is instead."""


@functools.lru_cache(maxsize=1)
def _mount_table() -> tuple[Mount, ...]:
    """The mount table, read once per process; empty where there is none (macOS)."""
    try:
        return tuple(mounts())
    except (OSError, ValueError):
        return ()


def pseudo_filesystem(path: Path | str) -> str | None:
    """Where `path` (symlinks resolved) is a pseudo-filesystem's file: its place and type, as
    "/proc (proc)"; None for a file of an ordinary filesystem."""
    resolved = os.path.realpath(path)
    mount = mount_of(Path(resolved), list(_mount_table()))
    place = next((top for top in PSEUDO_PLACES if resolved == top or resolved.startswith(top + "/")), None)
    if mount is not None and mount.fstype in PSEUDO_FILESYSTEMS:
        return f"{place or mount.point} ({mount.fstype})"
    if place is None:
        return None
    # under /proc, /sys or /dev: a mount of its own below /dev (/dev/shm, a tmpfs) holds files
    if place == "/dev" and mount is not None and mount.point.startswith("/dev/"):
        return None
    return f"{place} ({mount.fstype if mount else 'no mount table'})"


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for binary reading; an OSError when it is not a regular file (streamed by
    sha256_of: a tarball may take longer than any deadline, and its place is checked)."""
    fd = _open_checked(path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _open_checked(path: Path) -> int:
    """A non-blocking descriptor of `path`, a regular file of an ordinary filesystem; an OSError
    (see the module) otherwise."""
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
    place = pseudo_filesystem(path)
    if place is not None:
        os.close(fd)
        raise NotARegularFile(errno.EINVAL, f"a file of the pseudo-filesystem {place}, whose files "
                                            "may never end, not a regular file", str(path))
    return fd


def read_regular(path: Path, limit: int = MAX_INPUT_BYTES, deadline: float = READ_DEADLINE) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, read within `deadline` seconds; an
    OSError otherwise. The one reader of an input file: every other reads through it."""
    fd = _open_checked(path)
    try:
        return read_bounded(fd, limit, deadline, str(path))
    finally:
        os.close(fd)


def read_bounded(fd: int, limit: int, deadline: float, name: str) -> bytes:
    """At most `limit` bytes from a non-blocking descriptor up to its end, within `deadline`
    seconds (waiting for data included); NotARegularFile when it is larger or slower."""
    ends = time.monotonic() + deadline
    chunks: list[bytes] = []
    size = 0
    while True:
        left = ends - time.monotonic()
        if left <= 0:
            raise NotARegularFile(errno.ETIMEDOUT, f"still not read to its end after {deadline:.0f} s, "
                                                   "not a regular file", name)
        try:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
        except BlockingIOError:  # a file with no data yet: wait for some, not past the deadline
            select.select([fd], [], [], left)
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise NotARegularFile(errno.EFBIG, f"larger than {limit >> 20} MiB, the limit for this file", name)


class NotUtf8Text(ValueError):
    """Bytes that are not UTF-8 text; str() is `LABEL:LINE: byte 0x.. is not UTF-8 text`."""


def decode_text(data: bytes, label: str) -> str:
    """UTF-8 text, a BOM dropped (it means the same text), without a NUL byte: the one decoding
    of every input."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise NotUtf8Text(f"{label}:{line}: byte 0x{data[err.start]:02x} is not UTF-8 text") from None
    nul = data.find(b"\0")
    if nul >= 0:  # no text holds one, and a value with it would reach a subprocess (ValueError)
        line = data.count(b"\n", 0, nul) + 1
        raise NotUtf8Text(f"{label}:{line}: byte 0x00 (NUL) is not text")
    return text


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
