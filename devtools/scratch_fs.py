#!/usr/bin/env python3
"""A journaled scratch filesystem for one test run, where the machine's /tmp is ext4 without one.

On ext4 without a journal the kernel will not reuse an inode freed less than a minute ago, and
looks at every such inode each time it creates a file (fs/ext4/ialloc.c, `recently_deleted`).
The suite unpacks and deletes trees of 12,000 files over and over (torch's headers, rattler's
environments, image root filesystems), so there a file created after such a delete costs about
ten times more (docs/real-tool-checks.md, "Deleting and creating files on this machine's
filesystem"). An ext4 with a journal does not check. `.ci/run` therefore runs the suite with
TMPDIR on one, made for the run in a sparse file in /tmp and removed after it:

    folder=$(python3 devtools/scratch_fs.py up --owner $$)     # prints nothing where not needed
    TMPDIR=$folder devtools/run-tests
    python3 devtools/scratch_fs.py down "$folder"

`up` makes one only where all of this holds, and otherwise prints nothing and says why on
stderr: the user is root (mount and losetup), TMPDIR's filesystem is ext4 without a journal,
and it has room for the suite (SUITE_GB) with RESERVE_GB left over for what the run writes
outside TMPDIR (~/.cache, which a fresh run fills with about 14 GB). The scratch filesystem is
sized so that it fills before the disk under it: a full suite sees `No space left on device`,
not I/O errors. It is mounted with `discard`, so what the run deletes goes back to that disk.

A run killed before its `down` (CI's time limit) leaves its scratch mounted: `up` and `clean`
remove every one whose owner process is gone.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common.mounts import Mount, mount_of, mounts  # noqa: E402

PREFIX = "feedstock-scratch-"
SUITE_GB = 40      # the most the whole suite has held at once under TMPDIR, with room to spare
RESERVE_GB = 16    # left to the disk under it, for ~/.cache and the rest of the machine
PID_DIGITS = 7     # Linux's largest pid_max, 4194304, has 7
GIB = 1 << 30


def scratch_name(owner: int) -> str:
    """The folder's name, the same length for every owner: rattler-build pads each build's host
    prefix to one total length, so a longer or shorter folder changes the prefix's name and with
    it every compile's command line, and ccache would find none of its objects again."""
    return f"{PREFIX}{owner:0{PID_DIGITS}d}"


def journal_missing(device: str, sysfs: Path = Path("/sys/fs/ext4")) -> bool | None:
    """True for an ext4 filesystem mounted without a journal, False with one, None when the
    kernel does not say (no such sysfs entry)."""
    task = sysfs / Path(device).resolve().name / "journal_task"   # /dev/mapper/x is dm-N there
    try:
        return task.read_text().strip() == "<none>"
    except OSError:
        return None


def why_not(base: Path, entry: Mount | None, is_root: bool, free_bytes: int,
            no_journal: bool | None, have_tools: bool) -> str | None:
    """None where a scratch filesystem helps and can be made on `base`, which `entry` holds,
    else the reason in a few words."""
    if entry is None or entry.fstype != "ext4":
        return f"{base} is on {entry.fstype if entry else 'an unknown filesystem'}, not a journal-less ext4"
    if no_journal is None:
        return f"the kernel does not say whether {entry.device} has a journal"
    if not no_journal:
        return f"{base}'s ext4 ({entry.device}) has a journal"
    if not is_root:
        return "not root (mounting a loop device needs it)"
    if not have_tools:
        return "mkfs.ext4, losetup or mount is missing"
    if free_bytes < (SUITE_GB + RESERVE_GB) * GIB:
        return (f"{base} has {free_bytes // GIB} GB free; a scratch filesystem needs "
                f"{SUITE_GB + RESERVE_GB} GB ({SUITE_GB} for the suite, {RESERVE_GB} left over)")
    return None


def size_bytes(free_bytes: int) -> int:
    """The scratch filesystem's size: the disk's free space less the reserve, in whole GiB."""
    return (free_bytes - RESERVE_GB * GIB) // GIB * GIB


def image_of(folder: Path) -> Path:
    """The sparse file that holds the scratch filesystem mounted at `folder`, beside it."""
    return folder.with_name(folder.name + ".img")


def _run(args: list[str]) -> str:
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {(proc.stderr or proc.stdout).strip() or proc.returncode}")
    return proc.stdout.strip()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def _loop_devices_of(image: Path) -> list[str]:
    """The loop devices whose backing file is `image` (`losetup -j` prints `/dev/loopN: ...`)."""
    try:
        out = _run(["losetup", "-j", str(image)])
    except (RuntimeError, OSError):
        return []
    return [line.split(":", 1)[0] for line in out.splitlines() if line.strip()]


def down(folder: Path, say=lambda line: print(line, file=sys.stderr)) -> None:
    """Unmount the scratch filesystem at `folder`, detach its loop device, remove its image
    file and the folder. What is already gone is skipped."""
    image = image_of(folder)
    if any(m.point == str(folder) for m in mounts()):
        proc = subprocess.run(["umount", str(folder)], capture_output=True, text=True)
        if proc.returncode != 0:   # a process of the run still inside: detach it, it goes when they do
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, text=True)
    for device in _loop_devices_of(image):
        subprocess.run(["losetup", "-d", device], capture_output=True, text=True)
    image.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except FileNotFoundError:
        pass
    except OSError as err:
        say(f"scratch-fs: could not remove {folder}: {err.strerror}")
        return
    say(f"scratch-fs: removed {folder}")


def clean(base: Path, say=lambda line: print(line, file=sys.stderr)) -> int:
    """Remove every scratch filesystem under `base` whose owner process is gone; how many."""
    pattern = re.compile(re.escape(PREFIX) + r"(\d+)(\.img)?$")
    owners: dict[Path, int] = {}
    candidates = [Path(m.point) for m in mounts() if Path(m.point).parent == base]
    candidates += list(base.glob(PREFIX + "*")) if base.is_dir() else []
    for path in candidates:
        match = pattern.match(path.name)
        if match:
            owners[base / f"{PREFIX}{match.group(1)}"] = int(match.group(1))   # as found, padded or not
    stale = [folder for folder, pid in sorted(owners.items()) if not _alive(pid)]
    for folder in stale:
        down(folder, say)
    return len(stale)


def make(folder: Path, size: int) -> None:
    """A journaled ext4 of `size` bytes in the sparse file FOLDER.img, mounted at FOLDER (made
    here, open to all as /tmp is). Raises RuntimeError or OSError; `down` removes what was made."""
    image = image_of(folder)
    folder.mkdir()
    with open(image, "xb") as sparse:
        sparse.truncate(size)
    # lazy init: mkfs writes a few MB, not the inode tables; the kernel fills them in later
    _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-L", "feedstock-tmp",
          "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", str(image)])
    # direct I/O: the run's files are cached once, by the scratch filesystem, not a second time
    # as pages of the image file
    device = _run(["losetup", "--find", "--show", "--direct-io=on", str(image)])
    _run(["mount", "-o", "noatime,discard", device, str(folder)])
    folder.chmod(0o1777)


def up(base: Path, owner: int, say=lambda line: print(line, file=sys.stderr)) -> Path | None:
    """Make, mount and return the scratch folder for the run of process `owner`; None (said
    why) where it is not needed or cannot be made."""
    is_root = os.geteuid() == 0
    if is_root:
        clean(base, say)
    entry = mount_of(base, mounts())
    no_journal = journal_missing(entry.device) if entry and entry.fstype == "ext4" else None
    have_tools = all(shutil.which(tool) for tool in ("mkfs.ext4", "losetup", "mount", "umount"))
    free = shutil.disk_usage(base).free
    reason = why_not(base, entry, is_root, free, no_journal, have_tools)
    if reason:
        say(f"scratch-fs: the suite's temporary files stay in {base}: {reason}")
        return None
    folder = base / scratch_name(owner)
    size = size_bytes(free)
    try:
        make(folder, size)
    except (OSError, RuntimeError) as err:
        down(folder, lambda _line: None)
        say(f"scratch-fs: the suite's temporary files stay in {base}: could not make a scratch "
            f"filesystem ({err})")
        return None
    say(f"scratch-fs: the suite's temporary files go to {folder}, a journaled ext4 of {size // GIB} GB "
        f"in {image_of(folder)} ({base}'s ext4 has no journal: creating files after deleting many is ~10x slower there)")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="devtools/scratch_fs.py",
        description="A journaled ext4 scratch filesystem for one test run, where TMPDIR's ext4 has no "
                    "journal (see this file's docstring). Messages go to stderr.")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="make and mount one; print its folder (nothing where not needed)")
    start.add_argument("--owner", type=int, required=True,
                      help="the process whose run it is (a script's $$); `clean` removes it once that is gone")
    remove = commands.add_parser("down", help="unmount and remove the one at FOLDER")
    remove.add_argument("folder", type=Path)
    commands.add_parser("clean", help="remove those whose owner process is gone")
    args = parser.parse_args(argv)
    base = Path(os.environ.get("TMPDIR") or "/tmp")
    if not base.is_dir():
        print(f"scratch-fs: error: TMPDIR {base} is not a folder; point it at one or unset it", file=sys.stderr)
        return 2
    if args.command == "up":
        if args.owner <= 1 or not _alive(args.owner):
            print(f"scratch-fs: error: --owner {args.owner} is not a running process; give the run's "
                  "shell ($$)", file=sys.stderr)
            return 2
        folder = up(base, args.owner)
        if folder:
            print(folder)
        return 0
    if args.command == "down":
        if not args.folder.name.startswith(PREFIX):
            print(f"scratch-fs: error: {args.folder} is not a scratch folder ({PREFIX}N)", file=sys.stderr)
            return 2
        down(args.folder)
        return 0
    clean(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
