"""common/atomic_files.py: the one writer of build-locally.py and the feedstock tools."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from common.atomic_files import atomic_path, leftover_temps, write_atomically


def test_a_written_file_replaces_the_old_one_and_keeps_its_mode(tmp_path: Path):
    target = tmp_path / "settings.yaml"
    target.write_text("old\n")
    target.chmod(0o640)
    write_atomically(target, "new\n")
    assert target.read_text() == "new\n" and target.stat().st_mode & 0o777 == 0o640
    assert leftover_temps(tmp_path) == []


def test_a_new_file_gets_the_default_mode(tmp_path: Path):
    target = tmp_path / "sub" / "new.txt"
    write_atomically(target, "x")
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    target = tmp_path / "summary.zip"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as temp:
            temp.write_text("half")
            raise RuntimeError("disk trouble")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.zip"]


def test_a_symlink_is_replaced_by_a_file_of_the_default_mode(tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    outside.chmod(0o777)
    link = tmp_path / "link.txt"
    link.symlink_to(outside)
    write_atomically(link, "ours")
    assert not link.is_symlink() and link.read_text() == "ours" and outside.read_text() == "theirs"
    assert link.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def test_atomic_folder_replaces_the_old_one_whole_or_leaves_it(tmp_path):
    from common.atomic_files import atomic_folder

    target = tmp_path / "view"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_folder(target) as building:
            (building / "half.txt").write_text("half")
            raise RuntimeError("stopped halfway")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["view"] and (target / "old.txt").is_file()
    with atomic_folder(target) as building:
        (building / "new.txt").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["view"]
    assert target.stat().st_mode & 0o777 != 0o700   # an ordinary folder, not mkdtemp's private one


def test_atomic_symlink_swaps_the_link_in_one_step(tmp_path):
    from common.atomic_files import atomic_symlink

    link = tmp_path / "pytorch-v2.14.1.tar.gz"
    atomic_symlink(link, tmp_path / "first")
    atomic_symlink(link, tmp_path / "second")
    assert link.readlink() == tmp_path / "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pytorch-v2.14.1.tar.gz"]
