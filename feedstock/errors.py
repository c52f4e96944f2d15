"""The one exception type the maintainer tools raise for problems a user can fix."""
from __future__ import annotations


class FeedstockError(Exception):
    """A user-facing error. ``str(err)`` is one line that says what is wrong and what to do.

    ``exit_code`` is what the command line exits with (2: bad input or usage).
    """

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        # keep the message to one line, whatever the caller built
        super().__init__(" ".join(str(message).split()))
        if exit_code is not None:
            self.exit_code = exit_code
