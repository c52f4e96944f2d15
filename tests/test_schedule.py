"""tests/conftest.py's order of test files for the two workers: the first two files start the CPU
and the CUDA chains, and every file of the shared packages (the gpu and rocm image modules too)
comes before the small files. Collected for real in a subprocess, with a plugin that prints what
each file uses."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT

PLUGIN = """\
import json
from tests.conftest import SHARED_PACKAGE_FIXTURES as SHARED   # what the order ranks by

def pytest_collection_finish(session):
    files = {}
    for item in session.items:
        entry = files.setdefault(item.nodeid.split("::")[0], {"fixtures": set(), "runs": False})
        if not any(m.args and m.args[0] is True for m in item.iter_markers("skipif")):
            entry["runs"] = True
            entry["fixtures"] |= SHARED & set(getattr(item, "fixturenames", ()))
    for name, entry in files.items():
        print("ORDER " + json.dumps({"file": name, "fixtures": sorted(entry["fixtures"]), "runs": entry["runs"]}))
"""
GPU_MODULE = "tests/feedstock/after_build/image/test_gpu_build_stage.py"
ROCM_MODULE = "tests/feedstock/after_build/image/test_rocm_build_stage.py"


def _order(tmp_path: Path) -> list[dict]:
    (tmp_path / "order_plugin.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "-p", "order_plugin", "tests"], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [json.loads(line[6:]) for line in proc.stdout.splitlines() if line.startswith("ORDER ")]


def test_the_two_chains_start_first_and_the_image_modules_take_their_turns(tmp_path):
    order = _order(tmp_path)
    first, second = order[0], order[1]
    assert first["runs"] and "wheelbuild" in first["fixtures"] and "cudawheel" not in first["fixtures"], first
    assert second["runs"] and "cudawheel" in second["fixtures"], second
    ranked = [i for i, entry in enumerate(order) if entry["fixtures"]]
    assert ranked == list(range(len(ranked)))       # the files of the shared packages, first
    for module in (GPU_MODULE, ROCM_MODULE):
        [entry] = [entry for entry in order if entry["file"] == module]
        assert entry["runs"] and entry["fixtures"], entry   # no gate: CI runs them
