"""feedstock/atomic_files.py: several files replaced all or nothing, Ctrl-C held back while they are renamed."""
from __future__ import annotations

import os
import signal

import pytest

from feedstock import atomic_files
from feedstock.atomic_files import replace_files, signals_held


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Ctrl-C raises KeyboardInterrupt here, whatever handler an earlier test left installed."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_during_the_commit_arrives_after_every_rename(tmp_path, monkeypatch):
    files = {tmp_path / f"job{i}.yaml": f"new {i}\n" for i in range(5)}
    for path in files:
        path.write_text("old\n")
    obsolete = tmp_path / "gone.yaml"
    obsolete.write_text("old\n")
    real_replace = os.replace
    calls = []

    def replace_then_interrupt(src, dst):  # Ctrl-C right after the first rename
        real_replace(src, dst)
        calls.append(dst)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(atomic_files.os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        replace_files(files, remove=[obsolete])
    assert len(calls) == 5  # every rename happened before the interrupt arrived
    assert all(path.read_text() == text for path, text in files.items())
    assert not obsolete.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files)  # no temporaries


def test_signals_held_delivers_after_the_block():
    seen = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            seen.append("still running")
    assert seen == ["still running"]


def test_a_replaced_symlink_gets_a_new_files_mode_not_its_targets(tmp_path):
    """Issue 35: replacing a job file that was a symlink copied the link target's mode (0666)."""
    target = tmp_path / "shared.yaml"
    target.write_text("old")
    os.chmod(target, 0o666)
    link = tmp_path / "job.yaml"
    link.symlink_to(target)
    kept = tmp_path / "kept.yaml"
    kept.write_text("old")
    os.chmod(kept, 0o640)
    umask = os.umask(0o022)
    try:
        replace_files({link: "new", kept: "new"})
    finally:
        os.umask(umask)
    assert not link.is_symlink() and link.read_text() == "new"
    assert link.stat().st_mode & 0o777 == 0o644
    assert kept.stat().st_mode & 0o777 == 0o640        # a plain file keeps its own mode
    assert target.read_text() == "old" and target.stat().st_mode & 0o777 == 0o666
