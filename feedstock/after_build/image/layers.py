"""Layer tars with the same bytes for the same files: sorted names, owner 0:0, one fixed mtime,
pax format, no xattrs, no hard links (whether the installer hard-linked or copied a file must
not change the digest)."""
from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path
from typing import Iterable

from .tools import run


def _info(path: Path, name: str, mtime: int) -> tarfile.TarInfo:
    st = path.lstat()
    info = tarfile.TarInfo(name)
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISREG(st.st_mode):
        info.type = tarfile.REGTYPE
        info.size = st.st_size
    else:
        raise ValueError(f"{path}: not a file, folder or symlink")
    return info


def parents(names: Iterable[str]) -> set[str]:
    """Every folder above the given relative names."""
    found: set[str] = set()
    for name in names:
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            found.add("/".join(parts[:depth]))
    return found


def write_layer(root: Path, names: Iterable[str], dest: Path, mtime: int) -> int:
    """A tar of `names` (relative to `root`) and the folders above them; returns its size."""
    wanted = set(names)
    entries = sorted(wanted | parents(wanted))
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in entries:
            path = root / name
            info = _info(path, name, mtime)
            if info.type == tarfile.REGTYPE:
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    return dest.stat().st_size


def tree_names(root: Path) -> list[str]:
    """Every file, symlink and folder below `root`, relative, sorted."""
    names = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            names.append(name if rel == "." else f"{rel}/{name}")
    return sorted(names)


def unpack_layers(tars: Iterable[Path], dest: Path) -> None:
    """The root filesystem that layer tars make, applied in order (none holds a whiteout: a
    rootfs base and our own layers): what `umoci raw unpack` gives from the OCI layout, without
    decompressing the GBs of the torch layer again (85 s of a 217 s CPU image build)."""
    dest.mkdir(parents=True)
    for tar in tars:
        run(["tar", "--extract", "--file", str(tar), "--directory", str(dest), "--numeric-owner",
             "--preserve-permissions"], f"unpacking {tar.name} into {dest.name}")
