"""`python -m megabuild`: run the step for $PKG_NAME (see megabuild.steps)."""
from __future__ import annotations

import os
import sys

from .errors import MegabuildError
from .settings import start_step
from .steps import run_step


def main() -> int:
    for stream in (sys.stdout, sys.stderr):  # an ASCII terminal (LC_ALL=C) gets escapes, not a traceback
        stream.reconfigure(errors="backslashreplace")
    try:
        run_step(start_step(os.environ), base=os.environ)
    except MegabuildError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
