"""tests/support/shared_fixture.py: a session fixture built once for the run, with or without
xdist workers (two processes here stand for the two workers)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.shared_fixture import build_once

WORKER = """\
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.support.shared_fixture import build_once

class Factory:
    def getbasetemp(self):
        return Path(sys.argv[1])

def build(folder):
    (folder / "built-by").write_text(sys.argv[2])
    time.sleep(1)   # the other worker arrives while this one holds the lock
    return {{"folder": folder, "by": sys.argv[2]}}

print(build_once(Factory(), "demo", build)["by"])
"""


def test_two_workers_build_once_and_share_the_result(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(root=str(REPO_ROOT)))
    (tmp_path / "run").mkdir()
    workers = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "run" / f"popen-gw{i}"), f"gw{i}"],
                                stdout=subprocess.PIPE, text=True) for i in range(2)]
    said = [proc.communicate(timeout=60)[0].strip() for proc in workers]
    assert all(proc.returncode == 0 for proc in workers)
    builder = (tmp_path / "run" / "shared-demo" / "built-by").read_text()
    assert said == [builder, builder]          # one built it, the other loaded its result


def test_a_skip_is_shared_with_its_reason(tmp_path_factory):
    def skipping(folder: Path) -> dict:
        pytest.skip("no hipcc here")

    for _ in range(2):
        with pytest.raises(pytest.skip.Exception, match="no hipcc here"):
            build_once(tmp_path_factory, "skipping", skipping)


def test_a_failure_is_shared_and_not_built_again(tmp_path_factory):
    calls = []

    def failing(folder: Path) -> dict:
        calls.append(folder)
        (folder / "half-written").mkdir()   # a second build would trip over this
        raise RuntimeError("rattler-build failed: failed to find `patchelf`")

    with pytest.raises(RuntimeError, match="patchelf"):
        build_once(tmp_path_factory, "failing", failing)
    with pytest.raises(pytest.fail.Exception, match="failed in another worker: RuntimeError: .*patchelf"):
        build_once(tmp_path_factory, "failing", failing)
    assert len(calls) == 1
