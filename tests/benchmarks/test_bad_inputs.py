"""benchmarks/bad_inputs.py, the bad-input corpus: every command against broken files and bad
option values ends in one error line (exit 2 or 3), no traceback, the tree unchanged."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.build_locally import install_fake_conda

SCRIPT = REPO_ROOT / "benchmarks" / "bad_inputs.py"


@pytest.mark.slow   # a few hundred commands: 2-3 minutes of both cores
def test_the_corpus_finds_no_traceback_and_no_changed_tree():
    proc = subprocess.run([sys.executable, str(SCRIPT)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=1200)
    last = proc.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"bad inputs: (\d+) tried, (\d+) tracebacks, (\d+) trees changed, (\d+) hangs, "
                         r"(\d+) crashes, (\d+) orphans", last)
    assert match, proc.stdout[-3000:] + proc.stderr[-2000:]
    tried, tracebacks, changed, hangs, crashes, orphans = map(int, match.groups())
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert tried >= 350 and tracebacks == 0 and changed == 0 and hangs == 0 and crashes == 0 and orphans == 0, \
        proc.stdout[-3000:]


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


def _corpus():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bad_inputs
    finally:
        sys.path.pop(0)
    return bad_inputs


def test_a_killed_or_hung_up_case_is_judged_on_its_end_its_orphans_and_second_builds():
    """The lifecycle class's judge: SIGKILL is a death by SIGKILL; a hangup ends as an interrupt
    (129 or 130, its interrupted line last) or by the hangup itself; an orphan or a second build
    fails either; and neither death is a crash."""
    bad_inputs = _corpus()
    killed = bad_inputs.Case("build-locally --native", ("x",), signal_at=0.4, kill_with=int(signal.SIGKILL))
    hung_up = bad_inputs.Case("feedstock lint", ("lint",), signal_at=0.4, kill_with=int(signal.SIGHUP))
    judge = bad_inputs.judge_lifecycle
    assert judge(killed, -9, "", [], 0, 0) == ("", False)
    assert judge(killed, -9, "", ["123 sleep 300"], 0, 0)[0] == "1 orphans: 123 sleep 300"
    assert judge(killed, -9, "", [], 1, 0)[0] == "1 second builds beside the running one"
    assert judge(hung_up, 130, "error: python -m feedstock lint interrupted\n", [], 0, 0) == ("", False)
    assert judge(hung_up, 129, "build-locally: interrupted (SIGHUP)\n", [], 0, 0) == ("", False)
    assert judge(hung_up, bad_inputs.DIED_OF_HANGUP, "", [], 0, 0) == ("", False)
    assert judge(hung_up, 130, "", [], 0, 0)[0].startswith("exit 130 without an interrupted line")
    assert judge(hung_up, 1, "", [], 0, 0)[0] == "exit 1 after SIGHUP"
    assert judge(hung_up, 130, "Traceback (most recent call last):\n", [], 0, 0) == ("traceback", True)
    for case, code in ((killed, -9), (hung_up, bad_inputs.DIED_OF_HANGUP), (hung_up, -2)):
        assert not bad_inputs._crashed(bad_inputs.Result(case, code, ""))
    assert bad_inputs._crashed(bad_inputs.Result(hung_up, -11, ""))


def test_an_orphan_is_found_by_the_variable_it_inherited(tmp_path):
    """processes_of: a process the command started, still running after the command ended."""
    bad_inputs = _corpus()
    token = f"orphan-test-{tmp_path.name}"
    env = {**os.environ, bad_inputs.RUN_TOKEN: token}
    subprocess.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], env=env, capture_output=True, text=True)
    found = bad_inputs.processes_of(token)
    try:
        assert len(found) == 1 and "sleep 30" in bad_inputs._describe(found[0])
    finally:
        for pid in found:
            os.kill(pid, signal.SIGKILL)


def test_the_stand_in_conda_build_says_when_it_builds_beside_another(tmp_path):
    """What the lifecycle class counts as a second build: the fake conda-build's record."""
    install_fake_conda(tmp_path)
    log = tmp_path / "conda.jsonl"
    env = {**os.environ, "FAKE_CONDA_LOG": str(log), "FAKE_CONDA_BUILD_SECONDS": "3", "CONFIG": "c"}
    argv = [str(tmp_path / "conda"), "build", "recipe", "--output-folder", str(tmp_path / "out")]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    while not log.exists():
        time.sleep(0.05)
    subprocess.run(argv, env={**env, "FAKE_CONDA_BUILD_SECONDS": "0"}, stdout=subprocess.DEVNULL, check=True)
    first.wait()
    subprocess.run(argv, env={**env, "FAKE_CONDA_BUILD_SECONDS": "0"}, stdout=subprocess.DEVNULL, check=True)
    overlaps = [json.loads(line)["build_overlap"] for line in log.read_text().splitlines()]
    assert overlaps == [False, True, False]
