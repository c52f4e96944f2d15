"""build-locally's error type and its names for common.errors' exit codes."""
from __future__ import annotations

from common.errors import (EXIT_BUSY, EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_HANGUP,  # noqa: F401
                           EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, ToolError)

EXIT_BUILD_FAILED = EXIT_FAILED     # at least one config failed to build
EXIT_PREFLIGHT = EXIT_ENVIRONMENT   # the machine cannot build: no engine, no tool, too little disk, CPU_COUNT


class LocalBuildError(ToolError):
    """A problem reported as one line ``error: <message>`` and a non-zero exit status."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message, exit_code)
