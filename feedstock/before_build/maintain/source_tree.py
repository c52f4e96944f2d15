"""Read files out of a PyTorch source: an unpacked directory or a release tarball.

A release tarball (``pytorch-vX.Y.Z.tar.gz``) is several hundred MB; reading it costs one
pass of decompression, so callers say up front which files they want (a predicate on the
path relative to the source root) and get them all from that one pass.
"""
from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from common.input_files import read_regular
from common.path_kinds import folder_problem

from ...errors import FeedstockError

Wanted = Callable[[str], bool]


@dataclass
class SourceFiles:
    """The wanted files of one source, by path relative to its root (``a/b.txt``)."""

    origin: Path
    top: str                                   # tarball: its single top directory; dir: the dir's name
    files: dict[str, bytes] = field(default_factory=dict)
    is_git: bool = False                       # a directory with git metadata (a checkout)

    def text(self, rel: str) -> str | None:
        data = self.files.get(rel)
        return None if data is None else data.decode("utf-8", errors="replace")

    def write_to(self, dest: Path, rels: set[str] | None = None) -> None:
        """Copy the loaded files (or ``rels`` of them) under ``dest``, keeping relative paths."""
        for rel, data in self.files.items():
            if rels is not None and rel not in rels:
                continue
            path = dest / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def check_tarball(path: Path) -> None:
    """Refuse anything that is not a readable tar archive (gz, bz2, xz or plain)."""
    if not path.is_file():
        raise FeedstockError(f"{path} does not exist; pass the release tarball (pytorch-vX.Y.Z.tar.gz)")
    if not tarfile.is_tarfile(path):
        raise FeedstockError(f"{path} is not a tarball; pass the release tarball (pytorch-vX.Y.Z.tar.gz)")


def load_source(path: Path, wanted: Wanted) -> SourceFiles:
    """The files of ``path`` (directory or tarball) for which ``wanted(rel)`` is true."""
    path = Path(path)
    if path.is_dir():
        problem = folder_problem(path)
        if problem:   # /proc/self is a folder too, of files that may never end
            raise FeedstockError(f"--source {path} {problem}")
        return _load_dir(path, wanted)
    check_tarball(path)
    return _load_tarball(path, wanted)


def _load_dir(root: Path, wanted: Wanted) -> SourceFiles:
    loaded = SourceFiles(origin=root, top=root.resolve().name, is_git=(root / ".git").exists())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            if wanted(rel):
                full = Path(dirpath) / name
                if full.is_file():
                    try:
                        loaded.files[rel] = read_regular(full)
                    except OSError as err:
                        raise FeedstockError(f"--source {root}: cannot read {rel} ({err.strerror})") from None
    return loaded


def _load_tarball(path: Path, wanted: Wanted) -> SourceFiles:
    top: str | None = None
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                name = member.name[2:] if member.name.startswith("./") else member.name
                first, _, rel = name.partition("/")
                if not first or first == ".":
                    continue
                if top is None:
                    top = first
                elif first != top:
                    raise FeedstockError(f"{path} has no single top directory ({top}/ and {first}/); "
                                         "pass the release tarball, which unpacks into pytorch-vX.Y.Z/")
                if not rel:
                    if not member.isdir():
                        raise FeedstockError(f"{path} has no single top directory ({first} is a file); "
                                             "pass the release tarball, which unpacks into pytorch-vX.Y.Z/")
                    continue
                rel = rel.rstrip("/")
                if member.isfile() and wanted(rel):
                    handle = archive.extractfile(member)
                    if handle is not None:
                        files[rel] = handle.read()
    except (tarfile.TarError, EOFError, OSError) as err:
        raise FeedstockError(f"{path} is not a readable tarball ({err}); download it again")
    if top is None:
        raise FeedstockError(f"{path} is an empty tarball; pass the release tarball (pytorch-vX.Y.Z.tar.gz)")
    return SourceFiles(origin=path, top=top, files=files)
