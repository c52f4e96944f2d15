"""The one exception type the driver raises for problems a user can fix.

`python -m megabuild` prints it as a single `error: ...` line and exits non-zero; every other
exception is a bug in the driver and keeps its traceback.
"""
from __future__ import annotations


class MegabuildError(Exception):
    """A precondition or input problem, with a message that says what to do."""
