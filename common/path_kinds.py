"""What a path is, in words, and whether it is the folder a command needs: the one check of
every path argument and input folder (issue 49, part 5).

A file where a folder belongs, a symbolic link loop, a device, a path with a NUL byte or one in
a pseudo-filesystem (/proc, /sys, /dev) would otherwise surface as NotADirectoryError, ELOOP or
ValueError wherever the first open happens. Each is one line here, before anything is written.
Standard library only: build-locally checks its folders with it.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .input_files import pseudo_filesystem

_KINDS = ((stat.S_ISREG, "a file"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def path_kind(path: Path | str) -> str:
    """"a folder", "a file", "nothing" (no such path), "a symbolic link to nothing", "a symbolic
    link loop", "a FIFO", "a character device", ...; "a path with a NUL byte" where the OS would
    refuse the name itself."""
    if "\0" in os.fspath(path):
        return "a path with a NUL byte"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a symbolic link to nothing" if os.path.islink(path) else "nothing"
    except NotADirectoryError:
        return "below a file (not a folder)"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "a symbolic link loop"
        return f"unreadable ({err.strerror})"
    if stat.S_ISDIR(mode):
        return "a folder"
    return next((name for test, name in _KINDS if test(mode)), "not a file or folder")


def folder_problem(path: Path | str, *, may_be_missing: bool = False) -> str | None:
    """None when `path` is a folder a command may read and write in (or, `may_be_missing`, a
    path where nothing is yet and one can be made); else what it is, for the caller's one line:
    "is a file; a folder belongs there"."""
    kind = path_kind(path)
    if kind == "nothing" and may_be_missing:
        parent = Path(os.path.abspath(path)).parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if path_kind(parent) != "a folder":
            return f"cannot be made: {parent} is {path_kind(parent)}; a folder belongs there"
        place = pseudo_filesystem(parent)
        return None if place is None else f"is in the pseudo-filesystem {place}; use an ordinary folder"
    if kind == "nothing":
        return "does not exist"
    if kind != "a folder":
        return f"is {kind}; a folder belongs there"
    place = pseudo_filesystem(path)
    if place is not None:
        return f"is in the pseudo-filesystem {place}; use an ordinary folder"
    return None


def file_url_path(url: str) -> Path:
    """The local path of a file:// URL, its %-escapes decoded as bytes (os.fsdecode): urllib's
    url2pathname decodes them as UTF-8 text, which an ASCII locale (LC_ALL=C) cannot encode back."""
    from urllib.parse import unquote_to_bytes, urlsplit
    return Path(os.fsdecode(unquote_to_bytes(urlsplit(url).path)))
