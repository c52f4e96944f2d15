"""feedstock/after_build/image/layers.py: the same files give the same layer bytes, whatever the disk says
about times, owners and hard links."""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
from pathlib import Path

import pytest

from feedstock.after_build.image.layers import tree_names, write_layer


def _tree(root: Path, hardlink: bool, mtime: int) -> list[str]:
    (root / "opt/env/lib/python3.11/site-packages/torch").mkdir(parents=True)
    (root / "opt/env/bin").mkdir(parents=True)
    lib = root / "opt/env/lib/libtorch_cpu.so"
    lib.write_bytes(b"\x7fELF" + bytes(range(256)) * 64)
    lib.chmod(0o755)
    twin = root / "opt/env/lib/libtorch_copy.so"
    if hardlink:
        os.link(lib, twin)
    else:
        twin.write_bytes(lib.read_bytes())
        twin.chmod(0o755)
    (root / "opt/env/lib/python3.11/site-packages/torch/lib").symlink_to("../../../..")
    (root / "opt/env/bin/python").write_text("#!/bin/sh\n")
    (root / "opt/env/bin/python").chmod(0o755)
    (root / "opt/env/empty").mkdir()
    for path in [root, *root.rglob("*")]:
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    return tree_names(root)


def test_same_files_same_bytes_whatever_the_disk_says(tmp_path):
    a = _tree(tmp_path / "a", hardlink=True, mtime=1_000_000)
    b = _tree(tmp_path / "b", hardlink=False, mtime=2_000_000_000)
    assert a == b
    write_layer(tmp_path / "a", a, tmp_path / "a.tar", 1700000000)
    write_layer(tmp_path / "b", list(reversed(b)), tmp_path / "b.tar", 1700000000)
    digest = [hashlib.sha256((tmp_path / n).read_bytes()).hexdigest() for n in ("a.tar", "b.tar")]
    assert digest[0] == digest[1]


def test_layer_members_sorted_root_owned_fixed_mtime_no_hardlinks(tmp_path):
    names = _tree(tmp_path / "t", hardlink=True, mtime=5)
    # only the leaves are asked for: the folders above them come by themselves
    leaves = [n for n in names if not (tmp_path / "t" / n).is_dir() or (tmp_path / "t" / n).is_symlink()]
    write_layer(tmp_path / "t", leaves + ["opt/env/empty"], tmp_path / "l.tar", 1234)
    with tarfile.open(tmp_path / "l.tar") as tar:
        members = tar.getmembers()
    listed = [m.name for m in members]
    assert listed == sorted(listed)
    assert {"opt", "opt/env", "opt/env/lib", "opt/env/empty"} <= set(listed)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", 1234)}
    assert not [m.name for m in members if m.islnk()]
    assert next(m for m in members if m.name.endswith("torch/lib")).linkname == "../../../.."
    assert next(m for m in members if m.name == "opt/env/bin/python").mode == 0o755
    assert not [m.name for m in members if m.pax_headers.keys() & {"SCHILY.xattr", "atime", "ctime"}]


@pytest.mark.image
@pytest.mark.skipif(shutil.which("umoci") is None, reason="umoci is not installed (apt-get install umoci)")
def test_unpacking_the_layer_tars_gives_umocis_root_filesystem(tmp_path: Path):
    """The build's fast path (the layers' own tars, in order) and `umoci raw unpack` of the
    OCI layout they went into give one tree: names, kinds, modes, owners, bytes, link targets."""
    from feedstock.after_build.image.base import Base
    from feedstock.after_build.image.layers import unpack_layers
    from feedstock.after_build.image.oci import Layout

    base_root, env_root = tmp_path / "base-root", tmp_path / "env-root"
    (base_root / "usr/bin").mkdir(parents=True)
    (base_root / "usr/bin/sh").write_bytes(b"#!shell\n")
    (base_root / "usr/bin/sh").chmod(0o755)
    (base_root / "etc").mkdir()
    (base_root / "etc/os-release").write_text("ID=debian\n")
    names = _tree(env_root, hardlink=True, mtime=1_000_000)
    tars = [tmp_path / "base.tar", tmp_path / "env.tar"]
    write_layer(base_root, tree_names(base_root), tars[0], 0)
    write_layer(env_root, names, tars[1], 0)
    layout = Layout(tmp_path / "oci", "test", 0)
    layout.start(Base("rootfs", tars[0]))
    layout.add_layer(tars[1], "the environment")
    ours, umocis = tmp_path / "ours", tmp_path / "umoci"
    unpack_layers(tars, ours)
    layout.unpack_rootfs(umocis)
    assert _listing(ours) == _listing(umocis)
    assert (ours / "opt/env/lib/libtorch_cpu.so").stat().st_mode & 0o777 == 0o755


def _listing(root: Path) -> list[tuple]:
    found = []
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        content = os.readlink(path) if path.is_symlink() else (path.read_bytes() if path.is_file() else b"")
        found.append((str(path.relative_to(root)), stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                      st.st_uid, st.st_gid, content))
    return found
