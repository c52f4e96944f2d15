"""The tiers stay honest: `devtools/run-tests --fast` names every marker pytest.ini declares, its
tier holds at least 300 tests, and none of them uses what the markers stand for: the session's
real packages or torch wheels (tests/conftest.py), or a module of the helpers that build, start
or download them. Collected for real in a subprocess, with a plugin that prints each test's
file and fixtures (those of its fixtures too)."""
from __future__ import annotations

import ast
import configparser
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import SHARED_PACKAGE_FIXTURES
from tests.support.paths import REPO_ROOT

PLUGIN = """\
import json

def pytest_collection_finish(session):
    for item in session.items:   # after -m deselected
        print("TIER " + json.dumps({"file": item.nodeid.split("::")[0], "test": item.nodeid,
                                    "fixtures": sorted(getattr(item, "fixturenames", ()))}))
"""
# what a test of the fast tier must not ask for: the shared packages and the real torch wheels
HEAVY_FIXTURES = SHARED_PACKAGE_FIXTURES | {"torch_wheel", "cuda_torch_wheel"}
# the helpers that compile, build packages or images, start engines or Slurm, or pip download
HEAVY_HELPERS = {f"tests.support.{name}" for name in (
    "megabuild_harness", "build_tools", "toolchain", "podman", "docker_daemon", "container_host",
    "slurm_cluster", "cluster_build", "image_rig", "free_threaded_python", "nvcc_package", "nvidia_wheels")} | {
    f"tests.realbuild.{name}" for name in ("real_packages", "install", "session", "rocm_job", "cuda_wheel_job")}
MIN_FAST_TESTS = 300


def fast_expression() -> str:
    [expression] = re.findall(r'^fast_tier="([^"]+)"$', (REPO_ROOT / "devtools" / "run-tests").read_text(),
                              re.MULTILINE)
    return expression


def declared_markers() -> set[str]:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO_ROOT / "pytest.ini")
    return {line.split(":", 1)[0].strip() for line in ini["pytest"]["markers"].strip().splitlines()}


def imported_modules(path: Path) -> set[str]:
    """Every module the file imports, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}   # from tests.support import x
    return names


def collect(tmp_path: Path, expression: str) -> list[dict]:
    (tmp_path / "tier_plugin.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "-p", "tier_plugin", "-m", expression, "tests"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("TIER ")]


def test_fast_leaves_out_every_declared_marker():
    expression = fast_expression()
    named = set(re.findall(r"\w+", expression)) - {"not", "or", "and"}
    assert named == declared_markers(), "devtools/run-tests's fast_tier and pytest.ini's markers differ"
    assert re.fullmatch(r"not \(\w+( or \w+)*\)", expression), expression   # none of them, whichever


def test_the_fast_tier_is_large_and_needs_no_real_tool(tmp_path):
    tests = collect(tmp_path, fast_expression())
    assert len(tests) >= MIN_FAST_TESTS, f"the fast tier holds {len(tests)} tests"
    heavy_fixtures = [f"{t['test']}: {', '.join(sorted(HEAVY_FIXTURES & set(t['fixtures'])))}" for t in tests
                      if HEAVY_FIXTURES & set(t["fixtures"])]
    assert not heavy_fixtures, ("in the fast tier, but their fixtures need pytest.ini's markers:\n"
                                + "\n".join(heavy_fixtures))
    heavy_imports = [f"{file}: {', '.join(sorted(imported_modules(REPO_ROOT / file) & HEAVY_HELPERS))}"
                     for file in sorted({t["file"] for t in tests})
                     if imported_modules(REPO_ROOT / file) & HEAVY_HELPERS]
    assert not heavy_imports, ("in the fast tier, but their helpers need pytest.ini's markers (pytestmark):\n"
                               + "\n".join(heavy_imports))
