"""common/input_files.py: only files that end are read (issue 49, part 2): a pseudo-filesystem's
file is refused by where it is, since S_ISREG does not tell, and every read has a deadline."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from common import input_files
from common.input_files import NotARegularFile, pseudo_filesystem, read_bounded, read_regular


@pytest.mark.parametrize("path", ["/proc/kmsg", "/proc/self/status", "/sys/kernel/mm", "/dev/null"])
def test_a_pseudo_filesystems_file_is_refused_by_where_it_is(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    assert pseudo_filesystem(path) is not None


def test_a_symlink_into_proc_is_refused_before_anything_is_read(tmp_path):
    # /proc/self/status is S_ISREG and ends; /proc/kmsg is S_ISREG and blocks (and a read consumes it)
    link = tmp_path / "meta.yaml"
    link.symlink_to("/proc/self/status")
    with pytest.raises(NotARegularFile, match=r"pseudo-filesystem /proc \(proc\)"):
        read_regular(link)


def test_an_ordinary_file_is_read_whole(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"a" * 3_000_000)
    assert pseudo_filesystem(path) is None
    assert read_regular(path) == b"a" * 3_000_000


def test_a_file_in_its_own_mount_below_dev_is_a_file(monkeypatch):
    table = (input_files.Mount("devtmpfs", "/dev", "devtmpfs"), input_files.Mount("tmpfs", "/dev/shm", "tmpfs"))
    monkeypatch.setattr(input_files, "_mount_table", lambda: table)
    assert pseudo_filesystem("/dev/shm/x") is None
    assert pseudo_filesystem("/dev/x") == "/dev (devtmpfs)"
    # a container's /dev is a tmpfs: its place still tells
    monkeypatch.setattr(input_files, "_mount_table", lambda: (input_files.Mount("tmpfs", "/dev", "tmpfs"),))
    assert pseudo_filesystem("/dev/x") == "/dev (tmpfs)"


def test_a_read_that_never_ends_stops_at_its_deadline():
    # a pipe with a writer that never writes: what a drained /proc/kmsg looks like to a reader
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        started = time.monotonic()
        with pytest.raises(NotARegularFile, match="still not read to its end after 0 s"):
            read_bounded(read_end, 1000, 0.3, "x")
        assert 0.25 < time.monotonic() - started < 2
    finally:
        os.close(read_end)
        os.close(write_end)


def test_more_than_the_limit_is_refused(tmp_path):
    path = tmp_path / "big"
    path.write_bytes(b"x" * (2 << 20))
    with pytest.raises(NotARegularFile, match="larger than 1 MiB"):
        read_regular(path, limit=1 << 20)
