"""devtools/scratch_fs.py, the journaled scratch filesystem `.ci/run` gives the suite where /tmp
is ext4 without a journal: when it is made and why not (read from /proc/mounts and the kernel's
sysfs, given here), the leftovers of a killed run removed, and, as root with loop devices, a real
one made, journaled, written to and removed without a trace."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.mounts import Mount, mount_of, mounts
from tests.support.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "devtools"))
import scratch_fs  # noqa: E402

SCRIPT = REPO_ROOT / "devtools" / "scratch_fs.py"
GIB = scratch_fs.GIB
# the mounts the cases below stand on (tests/common/test_mounts.py reads a real table's text)
TABLE = [Mount("/dev/vda", "/", "ext4"), Mount("tmpfs", "/dev/shm", "tmpfs"), Mount("/dev/vdb", "/srv", "xfs")]


def test_the_journal_is_read_from_the_kernels_sysfs(tmp_path):
    (tmp_path / "vda").mkdir()
    (tmp_path / "vda" / "journal_task").write_text("<none>\n")
    (tmp_path / "loop0").mkdir()
    (tmp_path / "loop0" / "journal_task").write_text("9789\n")
    assert scratch_fs.journal_missing("/dev/vda", tmp_path) is True
    assert scratch_fs.journal_missing("/dev/loop0", tmp_path) is False
    assert scratch_fs.journal_missing("/dev/sdz", tmp_path) is None


@pytest.mark.parametrize("base, is_root, free_gb, no_journal, tools, reason", [
    ("/tmp", True, 65, True, True, None),
    ("/srv/tmp", True, 65, None, True, "is on xfs, not a journal-less ext4"),
    ("/dev/shm", True, 65, None, True, "is on tmpfs"),
    ("/tmp", True, 65, False, True, "has a journal"),
    ("/tmp", True, 65, None, True, "the kernel does not say whether /dev/vda has a journal"),
    ("/tmp", False, 65, True, True, "not root"),
    ("/tmp", True, 65, True, False, "mkfs.ext4, losetup or mount is missing"),
    ("/tmp", True, 55, True, True, "has 55 GB free; a scratch filesystem needs 56 GB"),
])
def test_a_scratch_filesystem_is_made_only_where_it_helps_and_fits(base, is_root, free_gb, no_journal, tools,
                                                                   reason):
    entry = mount_of(Path(base), TABLE)
    said = scratch_fs.why_not(Path(base), entry, is_root, free_gb * GIB, no_journal, tools)
    if reason is None:
        assert said is None
    else:
        assert reason in said and "\n" not in said


def test_it_fills_before_the_disk_under_it():
    assert scratch_fs.size_bytes(65 * GIB + 123) == (65 - scratch_fs.RESERVE_GB) * GIB


def test_the_folders_name_has_one_length_for_every_owner():
    """ccache's objects of a dependent's build are found again only under a build folder of the
    same length (rattler-build pads its host prefix to a fixed total length)."""
    names = [scratch_fs.scratch_name(pid) for pid in (1, 4242, 4194304)]
    assert names[1] == "feedstock-scratch-0004242"
    assert len({len(name) for name in names}) == 1


def test_down_refuses_a_folder_that_is_not_a_scratch_folder(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "down", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("scratch-fs: error:") and "feedstock-scratch-N" in proc.stderr
    assert tmp_path.is_dir()


@pytest.mark.parametrize("argv, env, words", [
    (["up", "--owner", "99999999"], {}, "--owner 99999999 is not a running process"),
    (["up", "--owner", str(1 << 40)], {}, "is not a running process"),
    (["up", "--owner", "1"], {}, "--owner 1 is not a running process"),
    (["clean"], {"TMPDIR": "/nonexistent-scratch-base"}, "TMPDIR /nonexistent-scratch-base is not a folder"),
])
def test_bad_arguments_are_one_error_line_and_exit_2(argv, env, words):
    proc = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True,
                          env={**os.environ, **env})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("scratch-fs: error:") and words in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_clean_removes_what_a_killed_run_left_and_keeps_a_live_runs(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):
        (tmp_path / f"feedstock-scratch-{pid}").mkdir()
        (tmp_path / f"feedstock-scratch-{pid}.img").write_bytes(b"\0" * 16)
    (tmp_path / "feedstock-scratch-notes.txt").write_text("not ours")
    said: list[str] = []
    assert scratch_fs.clean(tmp_path, said.append) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"feedstock-scratch-{os.getpid()}", f"feedstock-scratch-{os.getpid()}.img", "feedstock-scratch-notes.txt"])
    assert said == [f"scratch-fs: removed {tmp_path / f'feedstock-scratch-{dead.pid}'}"]


def test_up_prints_the_folder_it_made_or_nothing_and_says_which(tmp_path):
    """`up` in a folder of the suite's own: under `.ci/run` on this machine that folder is on the
    journaled scratch filesystem already, so none is made, stdout stays empty (for `.ci/run`'s
    TMPDIR) and stderr says why in one line; as root on a journal-less ext4 with room one is made,
    mounted, named on stdout, and `down` removes it."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "up", "--owner", str(os.getpid())], capture_output=True,
                          text=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0 and proc.stderr.count("\n") == 1
    if not proc.stdout.strip():
        assert proc.stderr.startswith(f"scratch-fs: the suite's temporary files stay in {tmp_path}: ")
        return
    folder = Path(proc.stdout.strip())
    try:
        assert folder == tmp_path / scratch_fs.scratch_name(os.getpid())
        assert proc.stderr.startswith(f"scratch-fs: the suite's temporary files go to {folder}, a journaled ext4")
        [entry] = [m for m in mounts() if m.point == str(folder)]
        assert entry.fstype == "ext4" and scratch_fs.journal_missing(entry.device) is False
    finally:
        subprocess.run([sys.executable, str(SCRIPT), "down", str(folder)], check=True, capture_output=True)
    assert not folder.exists() and not scratch_fs.image_of(folder).exists()


def test_a_real_scratch_filesystem_is_journaled_and_leaves_nothing(tmp_path):
    missing = [tool for tool in ("mkfs.ext4", "losetup", "mount", "umount") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (util-linux, e2fsprogs)")
    if os.geteuid() != 0:
        pytest.skip("mounting a loop device needs root (CI runs as root)")
    if not Path("/dev/loop-control").exists():
        pytest.skip("no loop devices here (/dev/loop-control)")
    folder = tmp_path / scratch_fs.scratch_name(os.getpid())
    image = scratch_fs.image_of(folder)
    try:
        scratch_fs.make(folder, 256 << 20)
        [entry] = [m for m in mounts() if m.point == str(folder)]
        assert entry.fstype == "ext4" and entry.device.startswith("/dev/loop")
        assert scratch_fs.journal_missing(entry.device) is False
        assert (folder.stat().st_mode & 0o7777) == 0o1777
        (folder / "a" / "b").mkdir(parents=True)
        (folder / "a" / "b" / "file").write_text("on the scratch filesystem")
        assert image.stat().st_blocks * 512 < 64 << 20   # sparse: a few MB of 256 written
    finally:
        said: list[str] = []
        scratch_fs.down(folder, said.append)
    assert not any(m.point == str(folder) for m in mounts())
    assert not folder.exists() and not image.exists()
    assert said == [f"scratch-fs: removed {folder}"]
    assert subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True).stdout == ""
