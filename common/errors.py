"""The one error base and the one table of exit codes for build-locally.py and `python -m
feedstock` (the driver, recipe/megabuild, keeps its own: conda-build copies only recipe/).

An exit code says who can fix what went wrong:"""
from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1            # the work ran and did not succeed: a build, lint's findings, a dependent
EXIT_USAGE = 2             # bad input: an argument, a file, a value; the line says what to change
EXIT_ENVIRONMENT = 3       # this machine cannot do it: a tool, an engine, the disk, a channel's contents
EXIT_BUSY = 4              # another run holds the lock, and --no-wait was given: try later
EXIT_INTERRUPTED = 130     # Ctrl-C or SIGTERM (the shell's 128 + SIGINT)
EXIT_HANGUP = 129          # SIGHUP, a closed terminal, stopped like Ctrl-C (128 + SIGHUP)


class ToolError(Exception):
    """A problem the user can act on: `error: <str(err)>` on one line, then `exit_code`."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
