"""What a command prints survives any terminal: called once at each entry point.

Under `LC_ALL=C PYTHONUTF8=0` stdout is ASCII with `strict` (or `surrogateescape`) errors, so a
finding that quotes a non-ASCII line would end the command with a UnicodeEncodeError. Here a
character the terminal's encoding cannot hold is written as a backslash escape (`\\xe9`), and a
path's undecodable bytes (the surrogates `os.fsdecode` made of them) as those same bytes, so a
folder named in the locale's own bytes reads as the user typed it. Standard library only.
"""
from __future__ import annotations

import codecs
import sys

ERRORS = "feedstock-terminal"


def _escape(err: UnicodeError) -> tuple[str | bytes, int]:
    """A path's bytes as they were (surrogateescape); any other character as `\\x..`."""
    if isinstance(err, UnicodeEncodeError):
        chunk = err.object[err.start:err.end]
        if all(0xDC80 <= ord(char) <= 0xDCFF for char in chunk):
            return bytes(ord(char) - 0xDC00 for char in chunk), err.end
    return codecs.backslashreplace_errors(err)


codecs.register_error(ERRORS, _escape)


def printable_anywhere() -> None:
    """stdout and stderr write what their encoding cannot hold as escapes (see the module)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors=ERRORS)
            except (ValueError, OSError):  # a closed or detached stream: nothing to print to
                pass
