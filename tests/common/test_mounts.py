"""common/mounts.py: the mount table read with the kernel's octal escapes undone, and the mount
that holds a path (the longest mount point above it, the last one mounted where two share it)."""
from __future__ import annotations

from pathlib import Path

from common.mounts import Mount, is_at_or_below, mount_of, mounts

PROC_MOUNTS = """\
/dev/vda / ext4 rw,relatime,discard 0 0
proc /proc proc rw,nosuid 0 0
tmpfs /dev/shm tmpfs rw 0 0
/dev/loop3 /tmp/with\\040space ext4 rw,noatime 0 0
/dev/vdb /srv xfs rw 0 0
/dev/loop4 /tmp/tab\\011and\\134backslash ext4 rw 0 0
/dev/vdc /srv/data ext4 rw 0 0
/dev/vdd /srv/data ext4 rw 0 0
"""


def test_proc_mounts_are_read_with_their_escapes_undone():
    table = mounts(PROC_MOUNTS)
    assert [m.point for m in table] == ["/", "/proc", "/dev/shm", "/tmp/with space", "/srv",
                                        "/tmp/tab\tand\\backslash", "/srv/data", "/srv/data"]
    assert table[3] == Mount("/dev/loop3", "/tmp/with space", "ext4")


def test_a_path_belongs_to_the_longest_mount_point_above_it():
    table = mounts(PROC_MOUNTS)
    assert mount_of(Path("/tmp"), table).device == "/dev/vda"
    assert mount_of(Path("/tmp/with space/pytest-of-root"), table).device == "/dev/loop3"
    assert mount_of(Path("/srv/x"), table).fstype == "xfs"
    assert mount_of(Path("/srvx"), table).device == "/dev/vda"   # a prefix of a name is not a parent
    assert mount_of(Path("/srv/data/x"), table).device == "/dev/vdd"   # mounted over: the last one


def test_a_folder_holds_the_mounts_at_and_below_it_only():
    assert is_at_or_below("/tmp/a", "/tmp/a") and is_at_or_below("/tmp/a/b", "/tmp/a")
    assert is_at_or_below("/tmp/a/b", "/tmp/a/") and is_at_or_below("/srv", "/")
    assert not is_at_or_below("/tmp/ab", "/tmp/a") and not is_at_or_below("/tmp", "/tmp/a")
