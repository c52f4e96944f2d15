"""Exit codes and the one error type every module raises for bad input or an unready machine."""
from __future__ import annotations

EXIT_OK = 0
EXIT_BUILD_FAILED = 1      # at least one config failed to build
EXIT_USAGE = 2             # bad arguments, unknown config, nothing selectable
EXIT_PREFLIGHT = 3         # the machine cannot build: no engine, no tool, too little disk, CPU_COUNT
EXIT_BUSY = 4              # --no-wait and another run holds the build_artifacts/ lock: try later
EXIT_INTERRUPTED = 130     # Ctrl-C / SIGTERM during a build (summary still printed)


class LocalBuildError(Exception):
    """A problem reported as one line ``error: <message>`` and a non-zero exit status."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
