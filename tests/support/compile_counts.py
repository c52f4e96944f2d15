"""The compile counts the after-build commands print (feedstock/after_build/compile_cache.py):
`N compiles, M from the cache (ccache in DIR)` after a prefix of the command's own. A test that
proves a compile counts compiler invocations this way, so a warm cache cannot fake it."""
from __future__ import annotations

import re


def compiles_said(text: str, prefix: str) -> list[int]:
    """The N of every line starting with `prefix` (a regular expression) and ending in the count."""
    pattern = rf"^{prefix}(\d+) compiles, \d+ from the cache \(ccache in "
    return [int(n) for n in re.findall(pattern, text, re.MULTILINE)]


def downstream_compiles(stderr: str, name: str) -> int:
    """The compiles of `name`'s builds in `downstream`'s stderr (0 without a line)."""
    return sum(compiles_said(stderr, rf"downstream: {re.escape(name)} against .*: "))


def build_stage_compiles(stdout: str) -> list[int]:
    """The compiles of each build stage in `image`'s stdout."""
    return compiles_said(stdout, "image: build stage: ")
