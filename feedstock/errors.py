"""The one exception type the maintainer tools raise for problems a user can fix."""
from __future__ import annotations

from common.errors import EXIT_USAGE, ToolError


class FeedstockError(ToolError):
    """A user-facing error. ``str(err)`` is one line that says what is wrong and what to do;
    ``exit_code`` is common.errors' (2: bad input or usage)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        # keep the message to one line, whatever the caller built
        super().__init__(" ".join(str(message).split()), exit_code)
