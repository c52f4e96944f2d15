"""benchmarks/bad_inputs.py, the bad-input corpus: every command against broken files and bad
option values ends in one error line (exit 2 or 3), no traceback, the tree unchanged."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "bad_inputs.py"


@pytest.mark.slow   # a few hundred commands: 2-3 minutes of both cores
def test_the_corpus_finds_no_traceback_and_no_changed_tree():
    proc = subprocess.run([sys.executable, str(SCRIPT)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=1200)
    last = proc.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"bad inputs: (\d+) tried, (\d+) tracebacks, (\d+) trees changed, (\d+) hangs, (\d+) crashes", last)
    assert match, proc.stdout[-3000:] + proc.stderr[-2000:]
    tried, tracebacks, changed, hangs, crashes = map(int, match.groups())
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert tried >= 350 and tracebacks == 0 and changed == 0 and hangs == 0 and crashes == 0, proc.stdout[-3000:]


def test_a_case_that_fails_is_named_and_counted(tmp_path):
    """The judge itself: a command that prints a traceback is a failure the summary counts."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bad_inputs
    finally:
        sys.path.pop(0)
    case = bad_inputs.Case("feedstock render", ("render", "x"), "recipe/meta.yaml", "non-utf8")
    traceback = "Traceback (most recent call last):\n  File ...\nUnicodeDecodeError: ...\n"
    assert bad_inputs.judge(case, 1, traceback, None) == ("traceback", True)
    assert bad_inputs.judge(case, 2, "error: one\nerror: two\n", None)[0] == "exit 2 with 2 error lines"
    assert bad_inputs.judge(case, 0, "rendered\n", None)[0].startswith("exit 0")
    assert bad_inputs.judge(case, 2, "error: recipe/meta.yaml:3: byte 0xe9 is not UTF-8 text\n", None) == ("", False)
    # an argparse usage error is one error line too
    assert bad_inputs.judge(case, 2, "usage: x\npython -m feedstock render: error: bad\n", None) == ("", False)


def test_a_signalled_case_is_judged_on_its_exit_its_lines_and_what_it_left(tmp_path):
    """The signals class's judge: stopped by SIGTERM, a command ends with 130 and one line (or
    by the signal, or as its full run ends), and every file it changed is as its full run
    leaves it: a half-written file or a temporary file left over is a changed tree."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bad_inputs
    finally:
        sys.path.pop(0)
    finished = {"tree/.ci_support/job.yaml": "new-digest"}
    judge = bad_inputs.judge_signalled
    assert judge(130, "error: python -m feedstock rerender interrupted\n", {}, finished, 0) == ("", False)
    assert judge(130, "error: python -m feedstock rerender interrupted\n",
                 {"tree/.ci_support/job.yaml": "new-digest"}, finished, 0) == ("", False)
    assert judge(-15, "", {}, finished, 0) == ("", False)
    assert judge(0, "rerender: done\n", {}, finished, 0) == ("", False)
    assert judge(1, "", {}, finished, 0)[0] == "exit 1 after SIGTERM"
    assert judge(130, "", {}, finished, 0)[0] == "exit 130 without an interrupted line last (0 error lines)"
    # a failed item reported before the interrupt is fine, as long as the interrupt is the last word
    assert judge(130, "error: einops: no solve\nerror: python -m feedstock downstream interrupted\n",
                 {}, finished, 0) == ("", False)
    assert judge(130, "Traceback (most recent call last):\nKeyboardInterrupt\n", {}, finished, 0) == ("traceback", True)
    assert judge(-1, "still running 15 s after SIGTERM", {}, finished, 0)[0].startswith("still running")
    torn = {"tree/.ci_support/.job.yaml.x1.tmp": "abc:644"}
    assert judge(130, "error: rerender interrupted\n", torn, finished, 0)[0] == "left tree/.ci_support/.job.yaml.x1.tmp"
    half = {"tree/.ci_support/job.yaml": "half-digest"}
    assert judge(130, "error: rerender interrupted\n", half, finished, 0)[0] == "left tree/.ci_support/job.yaml"


def test_only_a_death_the_signals_judge_refuses_is_a_crash():
    """The summary's crashes agree with judge_signalled: a signalled case that died of the SIGTERM
    it was sent, or of Python's SIGINT after its interrupt, is not a crash (a CI run counted one
    while the case itself passed); any other signal is, and so is any signal in a plain case."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bad_inputs
    finally:
        sys.path.pop(0)
    plain = bad_inputs.Case("feedstock render", ("render", "x"), "recipe/meta.yaml", "non-utf8")
    signalled = bad_inputs.Case("feedstock rerender", ("rerender",), signal_at=0.5)

    def crashed(case, code):
        return bad_inputs._crashed(bad_inputs.Result(case, code, ""))

    assert not crashed(signalled, -15) and not crashed(signalled, -2)
    assert crashed(signalled, -11) and crashed(signalled, -9)
    assert crashed(plain, -2) and crashed(plain, -15) and crashed(plain, -11)
    assert not crashed(plain, -1) and not crashed(plain, 2)
