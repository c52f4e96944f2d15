"""tests/support/machine_cache.py: a heavy shared build kept once per machine and key."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.machine_cache import cached_build, inputs_key


def test_one_build_per_key_and_one_entry_per_name(tmp_path):
    calls = []

    def build(entry: Path) -> dict:
        calls.append(entry.name)
        (entry / "made.txt").write_text(entry.name)
        return {"file": entry / "made.txt"}

    first = cached_build("thing", "k1", build, root=tmp_path)
    again = cached_build("thing", "k1", build, root=tmp_path)
    assert calls == ["k1"] and again == first and first["file"].read_text() == "k1"
    cached_build("thing", "k2", build, root=tmp_path)   # new inputs: built, the old entry gone
    assert calls == ["k1", "k2"]
    assert sorted(p.name for p in (tmp_path / "thing").iterdir() if p.is_dir()) == ["k2"]


def test_an_unfinished_or_failed_entry_is_never_loaded(tmp_path):
    (tmp_path / "thing" / "k1").mkdir(parents=True)
    (tmp_path / "thing" / "k1" / "half.txt").write_text("a run killed halfway")
    assert cached_build("thing", "k1", lambda entry: sorted(p.name for p in entry.iterdir()), root=tmp_path) == []

    def fails(entry: Path):
        (entry / "partial").write_text("x")
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError):
        cached_build("other", "k1", fails, root=tmp_path)
    assert not (tmp_path / "other" / "k1").exists()


def test_the_key_follows_names_bytes_and_extras(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("one")
    (tmp_path / "a" / "__pycache__").mkdir()
    (tmp_path / "a" / "__pycache__" / "f.pyc").write_bytes(b"\0")
    key = inputs_key([tmp_path / "a"], "gcc 12")
    (tmp_path / "a" / "__pycache__" / "f.pyc").write_bytes(b"\1")
    assert inputs_key([tmp_path / "a"], "gcc 12") == key               # byte code is not an input
    assert inputs_key([tmp_path / "a"], "gcc 13") != key
    (tmp_path / "a" / "f.txt").write_text("two")
    assert inputs_key([tmp_path / "a"], "gcc 12") != key
