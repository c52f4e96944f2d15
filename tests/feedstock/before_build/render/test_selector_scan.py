"""The one-pass selector scan finds what conda-build's selector pattern finds, on every line,
and in time linear in the line.

conda-build's rule is one regular expression (``sel_pat`` in conda_build/metadata.py), applied
to every rstripped, non-comment line that holds both brackets; its group 1 plus a trailing
quote, rstripped, is the text and its group 3 the selector. That pattern is the oracle here: the
lines are short random strings of the characters that matter to it.
"""
from __future__ import annotations

import atexit
import itertools
import re
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from feedstock.before_build.render.selectors import _find_selector, evaluate, select_lines, split_selectors

# Hypothesis caches the constants of the modules it sees under ./.hypothesis while the tests are
# collected, with or without a database: keep that out of the checkout, and gone at exit
_HOME = Path(tempfile.mkdtemp(prefix="hypothesis-home-"))
atexit.register(shutil.rmtree, _HOME, True)
set_hypothesis_home_dir(_HOME)

# conda-build's selector pattern, as a fact to test against (not used by the code under test)
SEL_PAT = re.compile(r"(.+?)\s*(#.*)?\[([^\[\]]+)\](?(2)[^\(\)]*)$")


def conda_build_split(line: str) -> tuple[str, str | None]:
    """(text, selector) of one line by conda-build's rule."""
    line = line.rstrip()
    if not line or line.lstrip().startswith("#"):
        return "", None
    quote = line[-1] if line[-1] in ("'", '"') else ""
    match = SEL_PAT.match(line) if ("[" in line and "]" in line) else None
    if match and match.group(3):
        return (match.group(1) + quote).rstrip(), match.group(3)
    return line, None


def ours(line: str) -> tuple[str, str | None]:
    (found,) = split_selectors(line + "\n")
    return found.text, found.selector


# the characters the pattern turns on, with blanks that are not a plain space (\s is Unicode's)
CHARACTERS = "#[]() a'\"\t\x1f\xa0\u3000"


@settings(max_examples=4000, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=CHARACTERS, max_size=24))
def test_the_scan_agrees_with_conda_builds_pattern(line):
    assert ours(line) == conda_build_split(line)


@settings(max_examples=1500, deadline=None, database=None, derandomize=True)
@given(st.lists(st.sampled_from(["#", "[", "]", "(", ")", " ", "a", "b", "'", '"', "[a]", " # ",
                                 "(b)", "[x and y]", "  ", "key: "]), max_size=16).map("".join))
def test_the_scan_agrees_on_lines_of_selector_shaped_pieces(line):
    assert ours(line) == conda_build_split(line)


def test_the_scan_agrees_on_every_short_line():
    """Every line of up to six of the characters that matter: no corner left to chance."""
    for size in range(1, 7):
        for chars in itertools.product("#[]( a'", repeat=size):
            line = "".join(chars)
            assert ours(line) == conda_build_split(line), line


def test_a_hostile_line_is_scanned_in_linear_time():
    """A line of `# [a](b)` pieces (or blanks before `[a]b`) took 55 s at 72 KB: every cut was
    retried. Sixteen times the line now takes about sixteen times as long, far under a second
    (the scan itself, uncached; the best of three, as other work on the machine only adds time)."""
    for piece, tail in ((" # [a](b)", ""), (" ", "[a]b"), ("#[", "a]"), ("[a]", " #")):
        times = []
        for repeat in (4_000, 64_000):
            line = "x:" + piece * repeat + tail
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                _find_selector(line)
                best = min(best, time.perf_counter() - started)
            times.append(best)
        assert times[1] < 1.0, (piece, times)
        assert times[1] < 16 * 6 * max(times[0], 1e-4), (piece, times)


def line_by_line(text: str, namespace: dict) -> tuple[str, list[int]]:
    """select_lines as the rule says it: every line of split_selectors, kept when it has no
    selector or a true one (the pieces select_lines joins must give exactly this)."""
    kept, numbers = [], []
    for line in split_selectors(text):
        if line.selector is None or evaluate(line.selector, namespace):
            kept.append(line.text)
            numbers.append(line.lineno)
    return "\n".join(kept) + "\n", numbers


@settings(max_examples=1500, deadline=None, database=None, derandomize=True)
@given(st.lists(st.sampled_from(["a: 1", "  - x  # [linux]", "# comment", "  # c [x]", "", "   ", "b: '[x]'",
                                 "  c  # [not win]", "d [osx]", "e\r", "f\x0bg", "  h # [a](b)", "x: [linux]",
                                 "y \t", "q\x1f"]), max_size=12).map("\n".join))
def test_selecting_by_pieces_is_selecting_line_by_line(text):
    namespace = {"linux": True, "osx": False, "win": False}
    numbers: list[int] = []
    assert (select_lines(text, namespace, "x", numbers), numbers) == line_by_line(text, namespace)
