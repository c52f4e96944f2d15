"""Source preparation before the first configure (megabuild/source_prep.py) on a copy of the
PyTorch-shaped test project, whose setup.py checks submodules like PyTorch's and whose CMake
includes NNPACK's DownloadSix.cmake (made to fail if it runs)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from megabuild.source_prep import prepare_source
from tests.support.build_tools import tool_path
from tests.support.megabuild_harness import copy_project

pytestmark = [pytest.mark.compile]


def test_prepare_source_removes_the_submodule_list_and_the_download(tmp_path: Path) -> None:
    src = copy_project(tmp_path / "src")
    six = src / "third_party" / "NNPACK" / "cmake" / "DownloadSix.cmake"
    assert (src / ".gitmodules").is_file() and "FATAL_ERROR" in six.read_text()
    changed = prepare_source(src)
    assert len(changed) == 2
    assert not (src / ".gitmodules").exists()
    assert "FATAL_ERROR" not in six.read_text() and six.is_file()
    assert prepare_source(src) == []  # a second run changes nothing


def test_unprepared_tree_fails_like_pytorch_and_prepared_tree_configures(tmp_path: Path) -> None:
    """Without the preparation the project's setup.py stops at the submodule check; after it,
    CMake configures (and so did not run the download script)."""
    src = copy_project(tmp_path / "src")
    env = {**os.environ, "PATH": tool_path()}  # PyPI's CMake, as every driver test builds with
    before = subprocess.run([sys.executable, "setup.py", "--cmake-only"], cwd=src, env=env,
                            capture_output=True, text=True)
    assert before.returncode != 0 and "submodule" in before.stderr
    prepare_source(src)
    after = subprocess.run([sys.executable, "setup.py", "--cmake-only"], cwd=src, env=env,
                           capture_output=True, text=True)
    assert after.returncode == 0, after.stdout[-2000:] + after.stderr[-2000:]
    assert (src / "build" / "CMakeCache.txt").is_file()
