"""The commands the docs show run as written.

Every line of a ```bash block in README.md and docs/*.md that calls ``python -m feedstock``
(any subcommand) or ``build-locally.py`` with ``--help``, ``--dry-run`` or ``--list`` is run
from the repository root with this test environment's Python, and must exit 0, or N where the
line's comment begins ``# exit N``. A command that writes (``rerender`` without ``--check``, ``bump``
without ``--dry-run``, ``deps --write-docs``, ``patches refresh``) runs in a copy of the
feedstock instead, so the checkout is never touched. Commands that need an input (a tarball, a
wheel) belong in ```text blocks, which are not run. The one batch command under "The batch
script as one command" runs with ``--dry-run`` appended.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import platform
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.feedstock_cli import FEEDSTOCK_INPUTS
from tests.support.feedstock_copy import copy_feedstock
from tests.support.paths import REPO_ROOT

# fewer than this means the extraction broke (or the docs lost their examples)
MIN_COMMANDS = 20
INTERPRETERS = ("python", "python3", ".venv/bin/python", ".venv/bin/python3")
READ_ONLY_FLAGS = frozenset({"--help", "-h", "--dry-run", "--list"})
FENCE = re.compile(r"^ {0,3}(`{3,})([^`]*)$")   # CommonMark: no backtick in a backtick fence's info string
EXIT_COMMENT = re.compile(r"#\s*exit (\d+)\b")   # a comment that begins "exit N"
LEADING_INTERPRETER = re.compile(r"^\s*(?:\.venv/bin/)?python3?(?=\s)")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")   # VAR=value before a command
# the old batch loop as one build-locally command: a real build, so run here with --dry-run
BATCH_PAGE = "docs/building-locally.md"
BATCH_HEADING = "## The batch script as one command"


@dataclass(frozen=True)
class DocCommand:
    page: str           # relative to the repository root
    line: int           # where the command starts
    text: str           # as written, comment included
    tool: str           # "feedstock" or "build-locally"
    expected_exit: int
    writes: bool

    @property
    def command(self) -> str:
        return " ".join(shlex.split(self.text, comments=True))


def command_id(command: DocCommand) -> str:
    """The test id: the page and the command without its comment."""
    return f"{command.page}::{command.command}"


def bash_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, logical line) of every ```bash block; backslash continuations joined."""
    fence = ""          # the open fence's backticks, "" outside a block
    is_bash = False
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if not fence and match:
            fence, is_bash = match.group(1), match.group(2).strip().split(" ")[0] == "bash"
            continue
        if fence and line.strip().startswith(fence) and set(line.strip()) == {"`"}:
            fence = ""
            continue
        if not fence or not is_bash:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        logical = " ".join(part.strip() for part in [*pending, line])
        pending = []
        if logical and not logical.startswith("#"):
            yield start, logical


def _strip_interpreter_options(words: list[str]) -> list[str]:
    """The words after the interpreter and its own options (``python3 -S build-locally.py``)."""
    rest = words[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        rest = rest[1:]
    return rest


def _writes(args: list[str]) -> bool:
    """Whether a ``python -m feedstock ARGS`` command changes the feedstock it runs on."""
    if "--help" in args or "-h" in args:
        return False
    words = list(args)
    while words and words[0].startswith("-"):   # global options: --feedstock-root DIR
        words = words[2:] if words[0] == "--feedstock-root" else words[1:]
    sub = words[0] if words else ""
    return ((sub == "rerender" and "--check" not in args) or (sub == "bump" and "--dry-run" not in args)
            or (sub == "deps" and bool({"--write-docs", "--write-readme"} & set(args)))
            or (sub == "patches" and "refresh" in args))


def classify(page: str, number: int, text: str) -> DocCommand | None:
    """The DocCommand a bash line is, or None when the docs test does not run it."""
    words = shlex.split(text, comments=True)
    if not words or words[0] not in INTERPRETERS:
        return None
    rest = _strip_interpreter_options(words)
    exit_match = EXIT_COMMENT.search(text)
    expected = int(exit_match.group(1)) if exit_match else 0
    if rest[:2] == ["-m", "feedstock"]:
        return DocCommand(page, number, text, "feedstock", expected, _writes(rest[2:]))
    if rest and Path(rest[0]).name == "build-locally.py" and READ_ONLY_FLAGS & set(rest[1:]):
        return DocCommand(page, number, text, "build-locally", expected, False)
    return None


def doc_pages() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def extract(page: Path) -> list[DocCommand]:
    rel = page.relative_to(REPO_ROOT).as_posix()
    found = (classify(rel, number, line) for number, line in bash_lines(page.read_text()))
    return [command for command in found if command is not None]


COMMANDS = [command for page in doc_pages() for command in extract(page)]


def _digest(root: Path) -> dict[str, str]:
    """sha256 of every file of the feedstock inputs and docs under ``root`` (to see writes)."""
    digests = {}
    for name in (*FEEDSTOCK_INPUTS, "README.md", "docs"):
        path = root / name
        files = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for file in (f for f in files if f.is_file() and "__pycache__" not in f.parts):
            digests[file.relative_to(root).as_posix()] = hashlib.sha256(file.read_bytes()).hexdigest()
    return digests


def run_as_written(command: DocCommand, cwd: Path) -> subprocess.CompletedProcess:
    """The documented line through bash, with this environment's Python as the interpreter."""
    line = LEADING_INTERPRETER.sub(shlex.quote(sys.executable), command.text, count=1)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}   # a copy of the feedstock has no feedstock/ package
    return subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_the_docs_show_enough_commands():
    assert len(COMMANDS) >= MIN_COMMANDS, [command_id(c) for c in COMMANDS]
    pages = {c.page for c in COMMANDS}
    assert {"README.md", "docs/building-locally.md", "docs/maintaining.md"} <= pages
    assert {c.tool for c in COMMANDS} == {"feedstock", "build-locally"}
    assert any(c.writes for c in COMMANDS) and any(c.expected_exit for c in COMMANDS)


def test_the_readme_starts_with_the_two_commands():
    """The build and the test suite, first, as two lines of one bash block (neither is run here)."""
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    first_block = lines[lines.index("```bash") + 1:lines.index("```")]
    assert lines.index("```bash") <= 2
    assert [shlex.split(line, comments=True) for line in first_block] == [
        ["python3", "build-locally.py", "--all"], ["devtools/run-tests"]]


def test_every_feedstock_and_build_locally_line_is_recognised():
    """A bash line naming the tools in another form (an env prefix, a path) would escape the test."""
    for page in doc_pages():
        rel = page.relative_to(REPO_ROOT).as_posix()
        for number, line in bash_lines(page.read_text()):
            words = shlex.split(line, comments=True)
            feedstock = "-m" in words and "feedstock" in words
            build_locally = (any(Path(w).name == "build-locally.py" for w in words)
                             and bool(READ_ONLY_FLAGS & set(words)))
            if feedstock or build_locally:
                assert classify(rel, number, line) is not None, f"{rel}:{number}: {line}"


def test_extraction_rules():
    """Only bash blocks; comments do not count as flags; continuations join; exit comments,
    interpreter options and writing commands are recognised."""
    text = "\n".join([
        "```bash",
        "python3 build-locally.py --all     # build (--dry-run: print the plan only)",
        "python3 -S build-locally.py \\",
        "    --help",
        ".venv/bin/python -m feedstock render bad   # exit 2: one line",
        ".venv/bin/python -m feedstock rerender",
        "python -m feedstock --feedstock-root . rerender --check   # CI: exit 1 when stale",
        "python -m feedstock bump 2.14.0 --source x.tar.gz --dry-run",
        "python -m feedstock deps --wheel w.whl --write-docs",
        "python -m feedstock patches refresh --help",
        "devtools/run-tests",
        "```",
        "```text",
        "python -m feedstock bump 2.14.0 --source x.tar.gz",
        "```",
        "```` ```bash ```` in prose is no fence",
        "python -m feedstock lint",
    ])
    found = [classify("x.md", n, line) for n, line in bash_lines(text)]
    got = [(c.line, c.command, c.tool, c.expected_exit, c.writes) for c in found if c]
    assert got == [
        (3, "python3 -S build-locally.py --help", "build-locally", 0, False),
        (5, ".venv/bin/python -m feedstock render bad", "feedstock", 2, False),
        (6, ".venv/bin/python -m feedstock rerender", "feedstock", 0, True),
        (7, "python -m feedstock --feedstock-root . rerender --check", "feedstock", 0, False),
        (8, "python -m feedstock bump 2.14.0 --source x.tar.gz --dry-run", "feedstock", 0, False),
        (9, "python -m feedstock deps --wheel w.whl --write-docs", "feedstock", 0, True),
        (10, "python -m feedstock patches refresh --help", "feedstock", 0, False),
    ]


@pytest.mark.parametrize("command", COMMANDS, ids=[command_id(c) for c in COMMANDS])
def test_documented_command_runs(command: DocCommand, tmp_path: Path):
    if command.tool == "build-locally" and (sys.platform != "linux" or platform.machine() != "x86_64"):
        pytest.skip("the documented plans select linux-64 configs, which only a linux-64 host builds")
    if command.writes:
        cwd = copy_feedstock(tmp_path / "feedstock", (*FEEDSTOCK_INPUTS, "README.md", "docs"))
    else:
        cwd = REPO_ROOT
    before = _digest(cwd)
    proc = run_as_written(command, cwd)
    where = f"{command.page}:{command.line}: {command.text}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    assert proc.returncode == command.expected_exit, where
    if command.expected_exit:
        # bad input is one clear line
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: "), where
    else:
        assert proc.stdout.strip() or proc.stderr.strip(), where
    if not command.writes:
        assert _digest(cwd) == before, f"a read-only example changed the checkout: {where}"


def first_command_after(text: str, heading: str) -> tuple[int, str]:
    """(line number, logical line) of the first bash line below ``heading``."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    number, line = next(bash_lines("\n".join(lines[start:])))
    return start + number, line


def test_the_batch_script_as_one_command_runs_with_dry_run(tmp_path: Path):
    """The old loop's steps in one command: with --dry-run appended, the plan shows CPU_COUNT in
    every build, the prune between builds and the zip after the batch, and writes nothing. It
    runs in a copy of the feedstock, so done-markers of real builds in the checkout play no part."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("--all plans linux-64 builds only on a linux-64 host")
    number, line = first_command_after((REPO_ROOT / BATCH_PAGE).read_text(), BATCH_HEADING)
    words = shlex.split(line, comments=True)
    assigned = dict(word.split("=", 1) for word in itertools.takewhile(ENV_ASSIGNMENT.match, words))
    command = words[len(assigned):]
    where = f"{BATCH_PAGE}:{number}: {line}"
    assert command[0] in INTERPRETERS and Path(command[1]).name == "build-locally.py", where
    assert {"--all", "--prune", "--zip-logs"} <= set(command) and "--dry-run" not in command, where
    assert "CPU_COUNT" in assigned, where
    cwd = copy_feedstock(tmp_path / "feedstock", (*FEEDSTOCK_INPUTS, "build-locally.py", "localbuild"))
    before = _digest(cwd)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **assigned}   # PYTHONPATH: the renderer
    proc = subprocess.run([sys.executable, *command[1:], "--dry-run"], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=env)
    out = proc.stdout
    assert proc.returncode == 0, f"{where}\n{out[-3000:]}{proc.stderr[-3000:]}"
    builds = out.count("\nenvironment:\n")
    assert builds > 1 and out.count(f"\n  CPU_COUNT={assigned['CPU_COUNT']}\n") == builds, out
    steps = [text for text in out.splitlines() if text.startswith(("between builds: ", "after the batch: "))]
    assert len(steps) == 2 and " system prune --force " in steps[0], out[-3000:]
    assert f"({builds - 1} time(s): between the {builds} config(s) that build" in steps[0], steps[0]
    zipped = f"after the batch: logs zipped into {cwd / 'build_artifacts'}/build-logs-"
    assert steps[1].startswith(zipped), out[-3000:]
    assert _digest(cwd) == before and not (cwd / "build_artifacts").exists(), where
