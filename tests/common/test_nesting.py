"""common/nesting.py: selector expressions, TOML and JSON get YAML's depth limit, counted in one
linear pass before a parser recurses (issue 49, part 4)."""
from __future__ import annotations

import time

import pytest

from common.nesting import MAX_DEPTH, depth_refusal, too_deep


@pytest.mark.parametrize("text, line", [
    ("[" * 65 + "]" * 65, 1),
    ("a = 1\nb = " + "[" * 600 + "]" * 600, 2),                         # a pyproject.toml's list
    ('a = """\n' + "[" * 100 + '\n"""\nb = ' + "{" * 65, 4),            # a multi-line string does not count
    ("# " + "[" * 100 + "\nx = " + "(" * 65, 2),                        # nor does a comment
])
def test_brackets_past_the_limit_name_their_line(text, line):
    assert too_deep(text) == line


@pytest.mark.parametrize("text", [
    "[" * MAX_DEPTH + "]" * MAX_DEPTH,
    '"' + "[" * 100 + '"',                      # inside a string
    "'" + "[" * 100 + "'",
    'x = "a\\"' + "[" * 100 + '"',              # an escaped quote does not end the string
    "not " * 100 + "x",                         # words count only in an expression
])
def test_what_does_not_nest_passes(text):
    assert too_deep(text) is None


@pytest.mark.parametrize("selector", ["not " * 3000 + "linux", "-" * 3000 + "1", "2" + "**2" * 3000,
                                      "(" * 3000 + "x" + ")" * 3000, "not (" * 40 + "x" + ")" * 40])
def test_an_expression_counts_its_operators_too(selector):
    assert too_deep(selector, operators=True) == 1
    assert too_deep("linux and not aarch64 and cuda_compiler_version != 'None'", operators=True) is None


def test_the_refusal_is_one_line_with_the_label():
    assert depth_refusal("[" * 65, "pyproject.toml") == \
        "pyproject.toml:1: nested more than 64 levels deep, the limit for an input file"


def test_the_scan_is_linear():
    # a repodata.json-like text of 16 MB: far under a second per few MB, and no worse than linear
    row = '"pkg-1.0-0.tar.bz2": {"depends": ["a >=1", "b"], "name": "pkg [x]"},\n'
    small, big = "{" + row * 20_000 + "}", "{" + row * 320_000 + "}"
    started = time.perf_counter()
    assert too_deep(small) is None
    first = time.perf_counter() - started
    started = time.perf_counter()
    assert too_deep(big) is None
    assert time.perf_counter() - started < max(first * 16 * 2.5, 0.5)
