"""What a container engine needs from this machine, for the engine tests (Docker's and
podman's): a folder whose filesystem takes overlay mounts, and a tiny root filesystem made from
the host's own shell (no download, no image registry)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path


def fs_type(path: Path) -> str:
    """The filesystem type of path as `stat -f` names it (ext2/ext3, tmpfs, overlayfs, ...)."""
    proc = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True,
                          timeout=10)
    return proc.stdout.strip()


def overlay_mounts_in(parent: Path) -> bool:
    """An overlay mount with its upper layer in parent works, and parent is not itself overlay
    (Docker's overlay2 and podman's overlay refuse that backing). Needs root."""
    if fs_type(parent) == "overlayfs":
        return False
    with tempfile.TemporaryDirectory(prefix=".overlay-probe-", dir=parent) as tmp:
        lower, upper, scratch, merged = (Path(tmp) / name for name in ("l", "u", "w", "m"))
        for folder in (lower, upper, scratch, merged):
            folder.mkdir()
        mount = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                                f"lowerdir={lower},upperdir={upper},workdir={scratch}", str(merged)],
                               capture_output=True, timeout=10)
        if mount.returncode != 0:
            return False
        subprocess.run(["umount", str(merged)], capture_output=True, timeout=10)
        return True


def host_shell_rootfs(target: Path) -> Path:
    """A rootfs tar of the host's /bin/sh and the libraries ldd names for it (a few MB): enough
    for `sh -c` with the shell's builtins. Each file is stored at the path the loader looks
    for, as a regular file (links resolved)."""
    shell = Path("/bin/sh")
    ldd = subprocess.run(["ldd", str(shell.resolve())], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    paths = [shell] + [Path(word) for line in ldd.splitlines() for word in line.split()
                       if word.startswith("/")]
    with tarfile.open(target, "w") as tar:
        for path in dict.fromkeys(paths):
            info = tar.gettarinfo(str(path.resolve()), arcname=str(path).lstrip("/"))
            with open(path, "rb") as data:
                tar.addfile(info, data)
    return target


def rootful_tools_missing(tools: tuple[str, ...], install: str, why_root: str) -> str | None:
    """Why a rootful container engine cannot run its tests here (the reason to skip), or None."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed ({install}; .ci/run does)"
    if os.geteuid() != 0:
        return why_root
    return None
