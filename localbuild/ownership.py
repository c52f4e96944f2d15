"""Who owns what a run leaves in build_artifacts/: the user the build is for.

Run through sudo (a root-only podman or docker socket), build-locally works as root on behalf
of the user in SUDO_UID: the container hands its files back to HOST_USER_ID, and so do we with
the files this process wrote (logs, derived configs, the lock, the folder itself).
"""
from __future__ import annotations

import os
from pathlib import Path


def host_user_id(environ: dict[str, str] | None = None) -> str:
    """Ours, or under sudo the uid of the user who ran sudo."""
    if not hasattr(os, "getuid"):
        return "1000"
    uid = os.getuid()
    sudo_uid = (os.environ if environ is None else environ).get("SUDO_UID", "")
    if uid == 0 and sudo_uid.isdigit():
        return sudo_uid
    return str(uid)


def hand_back(folder: Path, uid: str) -> None:
    """Root working for another user: give them every root-owned entry under folder."""
    if not hasattr(os, "getuid") or os.getuid() != 0 or uid == "0" or not folder.exists():
        return
    target = int(uid)
    paths = [folder]
    for dirpath, dirnames, filenames in os.walk(folder):
        paths += [Path(dirpath, name) for name in dirnames + filenames]
    for path in paths:
        try:
            if path.lstat().st_uid == 0:
                os.lchown(path, target, -1)
        except OSError:
            continue  # gone meanwhile (a racing prune) or not ours to change: leave it
