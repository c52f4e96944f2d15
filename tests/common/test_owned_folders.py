"""common/owned_folders.py: folders named after their owner's pid; the next run removes those
of owners that are gone, and only those."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from common.owned_folders import alive, make_owned, owned_prefix, owner_of, remove_stale, stale


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_made_folder_names_this_process(tmp_path: Path):
    folder = make_owned(tmp_path, "run-")
    assert folder.parent == tmp_path and folder.name.startswith(f"run-{os.getpid()}-")
    assert owner_of(folder.name, "run-") == os.getpid()
    assert stale(tmp_path, "run-") == []   # ours, and we run


def test_the_folders_of_gone_owners_go_and_nothing_else(tmp_path: Path):
    dead = _dead_pid()
    left = tmp_path / f"{owned_prefix('run-', dead)}abc"
    (left / "deep").mkdir(parents=True)
    (left / "deep" / "file").write_text("x")
    living = tmp_path / f"{owned_prefix('run-', os.getppid())}abc"
    legacy = tmp_path / "run-abcdefgh"                       # made before names carried a pid
    other = tmp_path / f"{owned_prefix('other-', dead)}abc"   # another prefix
    for folder in (living, legacy, other):
        folder.mkdir()
    assert remove_stale(tmp_path, "run-") == [left]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (living, legacy, other))


def test_a_zombie_is_gone():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while True:   # exited, not yet reaped: a zombie
            state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
        assert not alive(proc.pid)
    finally:
        proc.wait()
    assert alive(os.getpid())
