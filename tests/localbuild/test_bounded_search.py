"""--filter under a bound (localbuild/bounded_search.py): a user's pattern that backtracks without
end, one too long, or a name too long to read ends in one error line (exit 2) in bounded time;
every other pattern finds what re.search finds."""
from __future__ import annotations

import re
import threading
import time

import pytest

from localbuild.bounded_search import MAX_PATTERN, MAX_SUBJECT, search_every
from localbuild.errors import LocalBuildError
from tests.support.build_locally import make_feedstock

NAMES = ["linux_64_blas_implmklcuda_compiler_version12.9", "linux_64_blas_implgenericcuda_compiler_versionNone",
         "osx_arm64_python3.12.____cpython", "caf\udce9_surrogate_escaped"]


@pytest.mark.parametrize("patterns", [["cuda"], ["^linux", "None$"], ["mkl|arm"], ["(?i)OSX"], ["\udce9"], ["nothing"]])
def test_the_search_finds_what_re_search_finds(patterns):
    wanted = [name for name in NAMES if all(re.search(p, name) for p in patterns)]
    assert search_every(patterns, NAMES) == wanted


def test_a_pattern_that_backtracks_without_end_is_stopped_at_its_deadline():
    started = time.monotonic()
    with pytest.raises(LocalBuildError) as err:
        search_every([r"(\w+\w+)+Z"], ["a" * 64], deadline=0.5)
    assert time.monotonic() - started < 3
    assert err.value.exit_code == 2 and "did not finish matching 1 config names in 0.5 s" in str(err.value)


def test_the_bound_holds_off_the_main_thread_too():
    """The worker process, not a signal, stops the search: any thread may ask."""
    caught: list[BaseException] = []

    def search():
        try:
            search_every([r"(a*)*b"], ["a" * 64], deadline=0.5)
        except LocalBuildError as exc:
            caught.append(exc)

    thread = threading.Thread(target=search)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and len(caught) == 1


def test_a_pattern_or_a_name_too_long_is_one_line():
    with pytest.raises(LocalBuildError, match=f"at most {MAX_PATTERN} are read"):
        search_every(["a" * (MAX_PATTERN + 1)], NAMES)
    with pytest.raises(LocalBuildError, match=f"more than --filter reads \\({MAX_SUBJECT}\\)"):
        search_every(["a"], ["a" * (MAX_SUBJECT + 1)])
    with pytest.raises(LocalBuildError, match="not a valid regular expression"):
        search_every(["a{99999999999}"], NAMES)


@pytest.mark.parametrize("args", [("--list",), ("--all", "--dry-run")])
def test_build_locally_ends_a_hostile_filter_in_one_line(tmp_path, args):
    fs = make_feedstock(tmp_path)
    started = time.monotonic()
    proc = fs.run(*args, "--filter", r"(\w+\w+)+Z")
    assert time.monotonic() - started < 10
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --filter "), proc.stderr
    assert "nested repeats" in lines[0]
