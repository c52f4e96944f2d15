"""The corpus's size-slopes class (issue 49, part 1): inputs whose reading once took time that
grew faster than their size end in bounded time, with one error line or the clean run's result."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from tests.support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "bad_inputs.py"


def _corpus():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bad_inputs
    finally:
        sys.path.pop(0)
    return bad_inputs


def test_the_size_breakages_grow_a_line_and_keep_its_meaning():
    """Each hostile line is SIZE_BYTES long and, for the selector lines, only a YAML comment:
    the file reads as before, so the clean run's result is the answer."""
    corpus = _corpus()
    cbc = (REPO_ROOT / "recipe" / "conda_build_config.yaml").read_bytes()
    for how in ("size-selector-line", "size-blank-line"):
        grown = corpus.SIZE_SLOPES[how](cbc)
        assert len(grown) - len(cbc) >= corpus.SIZE_BYTES - 9
        assert yaml.safe_load(grown) == yaml.safe_load(cbc)
    meta = (REPO_ROOT / "recipe" / "meta.yaml").read_bytes()
    url = corpus.SIZE_SLOPES["size-url-blanks"](meta)
    assert re.search(rb"^  url: [^ ].*[^ ] {%d}x$" % corpus.SIZE_BYTES, url, re.M)
    assert corpus.SIZE_SLOPES["size-url-blanks"](b"no url here\n") is None


@pytest.mark.slow   # about 40 commands: a minute of both cores
def test_the_size_slopes_class_ends_in_bounded_time():
    proc = subprocess.run([sys.executable, str(SCRIPT), "-k", "size-"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=900)
    last = proc.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"bad inputs: (\d+) tried, 0 tracebacks, 0 trees changed, 0 hangs, 0 crashes(?:, 0 orphans)?", last)
    assert match and proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert int(match.group(1)) >= 31   # 22 files and 9 filters (more when other classes repeat them)
