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
