#!/usr/bin/env python3
"""Build this feedstock's .ci_support configs locally (in Docker/Podman, or natively).

Standard library only; `python3 build-locally.py --help` explains the options.
The implementation lives in localbuild/.
"""
import sys
from pathlib import Path

if sys.version_info < (3, 9):
    sys.exit("error: build-locally.py needs Python 3.9 or newer (this is %d.%d)" % sys.version_info[:2])

FEEDSTOCK_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(FEEDSTOCK_ROOT))

from common.terminal import printable_anywhere  # noqa: E402

printable_anywhere()  # before anything prints: an ASCII terminal (LC_ALL=C) gets escapes, not a traceback
from common.child_lifetime import tie_children  # noqa: E402
from localbuild.cli import main  # noqa: E402

if __name__ == "__main__":
    tie_children()   # what this run starts ends with it, even after a kill -9
    sys.exit(main(FEEDSTOCK_ROOT))
