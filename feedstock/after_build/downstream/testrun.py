"""Import a dependent and run its tests with pytest in a prefix; the counts come from pytest's
JUnit XML, the first failure's message from the same file."""
from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .environment import clean_environ


@dataclass
class TestCounts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    first_failure: str = ""


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:200] if lines else ""


def import_error(python: Path, modules: tuple[str, ...], cwd: Path) -> str:
    """'' when every module imports in that Python, else the error's last line."""
    if not modules:
        return ""
    proc = subprocess.run([str(python), "-c", "import " + ", ".join(modules)], capture_output=True,
                          text=True, env=clean_environ(python=python), cwd=cwd, timeout=600)
    if proc.returncode == 0:
        return ""
    return ((proc.stderr.strip().splitlines() or ["import failed"])[-1])[:200]


def read_junit(path: Path) -> TestCounts:
    counts = TestCounts()
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            counts.failed += 1
            if not counts.first_failure:
                counts.first_failure = f"{case.get('name')}: {first_line(problem.get('message') or problem.text or '')}"
        elif case.find("skipped") is not None:
            counts.skipped += 1
        else:
            counts.passed += 1
    return counts


def run_pytest(python: Path, targets: list[str], cwd: Path, env: dict[str, str], pyargs: bool = False,
               timeout: int = 3600) -> TestCounts:
    """pytest in that Python on files (or, with pyargs, importable test packages)."""
    report = cwd / "junit.xml"
    report.unlink(missing_ok=True)
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
           *(["--pyargs"] if pyargs else []), *targets]
    # the tests' temporary files stay in the row's folder: einops' own suite runs torch.compile,
    # whose inductor keeps precompiled headers of ~150 MB under tempfile's folder
    scratch = cwd / "tmp"
    scratch.mkdir(exist_ok=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=clean_environ({"TMPDIR": str(scratch), **env}, python))
    (cwd / "pytest-output.txt").write_text(proc.stdout + proc.stderr)
    if not report.is_file():  # pytest did not get as far as running tests
        return TestCounts(failed=1, first_failure=f"pytest: {first_line(proc.stderr) or first_line(proc.stdout)}")
    return read_junit(report)
