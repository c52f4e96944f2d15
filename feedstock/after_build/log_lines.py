"""The line of a build's output that says what went wrong, for a one-line error."""
from __future__ import annotations

import re

# gcc, g++, nvcc, hipcc: `file:line[:col]: [fatal ]error: ...`
COMPILER_ERROR = re.compile(r"^\S+?:\d+(?::\d+)?:\s+(?:fatal\s+)?error\b")
ANY_ERROR = re.compile(r"(?:^|\s)(?:error|ERROR|Error)(?::|\s)")
# pip's own summary line comes before the build's output: not the cause
PIP_SUMMARY = "subprocess-exited-with-error"


def first_error_line(text: str) -> str | None:
    """The compiler's first error line, else the first other line that reads like an error."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if COMPILER_ERROR.search(line):
            return line[:240]
    for line in lines:
        if ANY_ERROR.search(line) and PIP_SUMMARY not in line:
            return line[:240]
    return None
