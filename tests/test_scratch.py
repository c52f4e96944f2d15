"""tests/support/scratch.py: module folders removed when their module passed, kept when it failed,
and mounts found and unmounted (a real tmpfs; root only)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.scratch import mounts_under, unmount_under

INNER = """\
from pathlib import Path
import pytest
from tests.support.scratch import module_scratch

@pytest.fixture(scope="module")
def work(request, tmp_path_factory):
    path = module_scratch(request, tmp_path_factory, "big")
    (path / "payload").write_bytes(b"x" * 1024)
    Path({record!r}).write_text(str(path))
    return path

def test_uses_it(work):
    assert (work / "payload").is_file()
    assert {passes}
"""


def _inner_run(tmp_path: Path, passes: bool) -> tuple[subprocess.CompletedProcess, Path]:
    record = tmp_path / "where.txt"
    test = tmp_path / "inner" / "test_inner.py"
    test.parent.mkdir()
    test.write_text(INNER.format(record=str(record), passes=passes))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "-c", os.devnull, "--rootdir", str(test.parent),
                           "--basetemp", str(tmp_path / "base"), str(test)],
                          env=env, capture_output=True, text=True, timeout=120)
    return proc, Path(record.read_text())


def test_a_passed_module_gives_its_folder_back(tmp_path):
    proc, folder = _inner_run(tmp_path, passes=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not folder.exists()


def test_a_failed_module_keeps_its_folder_to_be_read(tmp_path):
    proc, folder = _inner_run(tmp_path, passes=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (folder / "payload").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")
def test_a_mount_left_in_the_folder_is_found_and_unmounted(tmp_path):
    inner = tmp_path / "store" / "overlay"
    inner.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(inner)], check=True)
    try:
        assert mounts_under(tmp_path) == [str(inner.resolve())]
        assert unmount_under(tmp_path) == []
        assert mounts_under(tmp_path) == []
    finally:
        subprocess.run(["umount", "-l", str(inner)], capture_output=True)
