"""A user's regular expressions (--filter) searched under a bound of size and time.

Python's `re` backtracks: a pattern such as ``(\\w+\\w+)+Z`` runs without end on a name it does
not match, and no thread can stop it. So the search runs in a worker process that is killed at
its deadline, and the pattern and the names it reads are capped in size first.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

from .errors import EXIT_ENVIRONMENT, EXIT_USAGE, LocalBuildError

# characters of one --filter: a config name is a file name (at most 255 bytes), so a useful
# pattern is far shorter
MAX_PATTERN = 1000
# characters of one name searched: file names stop at 255 bytes, this only keeps the bound true
MAX_SUBJECT = 4096
# seconds for every filter against every name (thousands of names take milliseconds)
DEADLINE_S = 3.0

# the worker: patterns and names in (JSON on stdin), one yes/no per name out
_WORKER = ("import json, re, sys\n"
           "job = json.load(sys.stdin)\n"
           "found = [re.compile(p) for p in job['patterns']]\n"
           "json.dump([all(f.search(n) for f in found) for n in job['names']], sys.stdout)\n")


def check_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled --filter; one error line when it is too long or no regular expression."""
    if len(pattern) > MAX_PATTERN:
        raise LocalBuildError(f"--filter is {len(pattern)} characters long; at most {MAX_PATTERN} are "
                              "read (config names are file names, at most 255 bytes): shorten it",
                              EXIT_USAGE)
    try:
        return re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise LocalBuildError(f"--filter {_shown(pattern)} is not a valid regular expression ({exc})",
                              EXIT_USAGE) from None


def search_every(patterns: list[str], names: list[str], deadline: float = DEADLINE_S) -> list[str]:
    """The names that every pattern finds (re.search), in their order; one error line when the
    search does not end within ``deadline`` seconds."""
    if not patterns:
        return list(names)
    for pattern in patterns:
        check_pattern(pattern)
    long = next((name for name in names if len(name) > MAX_SUBJECT), None)
    if long is not None:
        raise LocalBuildError(f"a config name of {len(long)} characters is more than --filter reads "
                              f"({MAX_SUBJECT}); rename .ci_support/{long[:40]}...", EXIT_USAGE)
    # isolated (-I) and without site (-S): the worker needs only re and json, and starts fast;
    # ASCII JSON carries any name, surrogate-escaped ones included
    job = json.dumps({"patterns": patterns, "names": names})
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", _WORKER], input=job, capture_output=True,
                              text=True, encoding="ascii", timeout=deadline)
    except subprocess.TimeoutExpired:
        shown = " --filter ".join(_shown(p) for p in patterns)
        raise LocalBuildError(f"--filter {shown} did not finish matching {len(names)} config names in "
                              f"{deadline:g} s; a pattern with nested repeats such as (a+)+ backtracks "
                              "without end: simplify it", EXIT_USAGE) from None
    except OSError as exc:
        raise LocalBuildError(f"--filter: cannot start {sys.executable} to match the names "
                              f"({exc.strerror})", EXIT_ENVIRONMENT) from None
    try:
        found = json.loads(proc.stdout)
    except ValueError:
        found = None
    if proc.returncode != 0 or not isinstance(found, list) or len(found) != len(names):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise LocalBuildError(f"--filter: matching the config names failed ({last[:200]})", EXIT_USAGE)
    return [name for name, hit in zip(names, found) if hit]


def _shown(pattern: str) -> str:
    """The pattern as an error line shows it: quoted, and cut when long."""
    return repr(pattern if len(pattern) <= 80 else pattern[:60] + "...")
