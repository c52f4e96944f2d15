"""File moves of the split layout: staging, installing staged trees, symlinks, stale .pyc.

The build leaves `build/lib.<platform>-<cache tag>/torch/{bin,lib,include,share}`; the split
step copies those trees into the stage folder, the libtorch outputs copy the staged trees into
`$PREFIX` (after `find_clobbers` has found no file of another package that a staged file would
overwrite), and the pytorch output turns its own copies of those files into symlinks into
`$PREFIX`. Symbolic links inside the trees (`libfoo.so -> libfoo.so.1`) are kept as links.
"""
from __future__ import annotations

import filecmp
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

from .errors import MegabuildError
from .python_target import PythonTarget

LIBTORCH_DIRS = ("bin", "lib", "include", "share")


def is_python_library(name: str) -> bool:
    return name.startswith("libtorch_python")


def is_cuda_linalg_library(name: str) -> bool:
    return name.startswith("libtorch_cuda_linalg")


def is_loaded_by_path(name: str) -> bool:
    """Libraries torch/__init__.py dlopens by their path under torch/lib.

    glibc expands such a library's `$ORIGIN` to the folder it was opened from, so a symlink
    there would look for its NEEDED libraries (libcudart) in torch/lib, not in $PREFIX/lib.
    They stay real files, which the packager's relinking points at $PREFIX/lib.
    """
    return name.startswith("libtorch_global_deps")


def find_layout_dir(build_dir: Path, target: PythonTarget) -> Path:
    """`build/lib.*/torch` written for `target` (setuptools names the folder by cache tag)."""
    candidates = sorted(p for p in build_dir.glob("lib.*") if (p / "torch").is_dir())
    if not candidates:
        raise MegabuildError(f"no {build_dir}/lib.*/torch after the build; the front end did "
                             "not leave the setup.py layout")
    suffixes = (f"-{target.pyc_tag}", f"-{target.major_minor}")
    matching = [p for p in candidates if p.name.endswith(suffixes)]
    if len(matching) == 1:
        return matching[0] / "torch"
    if len(candidates) == 1:
        return candidates[0] / "torch"
    raise MegabuildError(f"cannot tell which of {', '.join(p.name for p in candidates)} in "
                         f"{build_dir} belongs to Python {target.version}; remove stale ones")


def iter_files(root: Path) -> Iterator[Path]:
    """Files and symlinks under root (symlinked folders are not followed)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(filenames):
            yield Path(dirpath) / name
        for name in sorted(dirnames):
            if (Path(dirpath) / name).is_symlink():
                yield Path(dirpath) / name


def copy_tree(src: Path, dst: Path, keep: Callable[[Path], bool] = lambda p: True) -> list[Path]:
    """Copy the files under src that `keep` accepts into dst (merging); returns dst paths."""
    copied = []
    for path in iter_files(src):
        if not keep(path):
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        if path.is_symlink():
            os.symlink(os.readlink(path), target)
        else:
            shutil.copy2(path, target)
        copied.append(target)
    return copied


def _same_entry(staged: Path, existing: Path) -> bool:
    """Whether installing `staged` over `existing` would leave it as it is."""
    if staged.is_symlink() or existing.is_symlink():
        return staged.is_symlink() and existing.is_symlink() and \
            os.readlink(staged) == os.readlink(existing)
    return existing.is_file() and filecmp.cmp(staged, existing, shallow=False)


def find_clobbers(src: Path, dst: Path) -> list[Path]:
    """Paths (relative to src, sorted) that copy_tree(src, dst) would replace with other content.

    A file or symlink already in dst with the same bytes (or the same link target) is not a
    clobber: that is the same step run again. A folder or file where a staged path or one of
    its parent folders would go is one.
    """
    clobbers = []
    for path in iter_files(src):
        rel = path.relative_to(src)
        target = dst / rel
        blocked_parent = any(os.path.lexists(parent) and not parent.is_dir()
                             for parent in list(target.parents)[: len(rel.parts) - 1])
        if blocked_parent or (os.path.lexists(target) and not _same_entry(path, target)):
            clobbers.append(rel)
    return sorted(clobbers)


def replace_stage(tmp: Path, final: Path) -> None:
    """Swap a freshly staged folder into place (the old stage is the driver's own output)."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def link_into_prefix(torch_dir: Path, prefix: Path, always: Callable[[str], bool],
                     keep: Callable[[str], bool] = is_loaded_by_path) -> list[Path]:
    """Replace files under torch/{bin,lib,include,share} that prefix has with symlinks to them.

    Links are relative when torch_dir lies inside prefix (a relocatable conda package),
    absolute otherwise. Files whose name `always` accepts are linked even when prefix lacks
    them (they belong to another output that is installed next to this one); files whose
    name `keep` accepts stay real files.
    """
    relative = prefix.resolve() in torch_dir.resolve().parents
    linked = []
    for sub in LIBTORCH_DIRS:
        root = torch_dir / sub
        if not root.is_dir():
            continue
        for path in list(iter_files(root)):
            provided = prefix / sub / path.relative_to(root)
            if keep(path.name) or not (os.path.lexists(provided) or always(path.name)):
                continue
            link = os.path.relpath(provided, path.parent) if relative else str(provided)
            tmp = path.with_name(f".{path.name}.megabuild-link")
            if os.path.lexists(tmp):
                tmp.unlink()
            os.symlink(link, tmp)
            os.replace(tmp, path)
            linked.append(path)
    return linked


def remove_foreign_pyc(roots: list[Path], pyc_tag: str) -> list[Path]:
    """Delete .pyc files not written for `pyc_tag` (e.g. cpython-312 in a 3.11 package)."""
    removed = []
    for root in roots:
        for path in list(iter_files(root)) if root.is_dir() else []:
            if path.suffix != ".pyc":
                continue
            in_cache = path.parent.name == "__pycache__"
            tag = path.name.split(".")[1] if in_cache and path.name.count(".") >= 2 else None
            if tag != pyc_tag:
                path.unlink()
                removed.append(path)
    return removed


def installed_top_levels(site_packages: Path, package: str = "torch") -> list[Path]:
    """Top-level folders installed by the distribution that owns `package` (from its RECORD)."""
    tops = {site_packages / package}
    for record in site_packages.glob("*.dist-info/RECORD"):
        lines = record.read_text(errors="replace").splitlines()
        if not any(line.startswith(f"{package}/__init__.py,") for line in lines):
            continue
        for line in lines:
            first = line.split(",", 1)[0].split("/", 1)
            if len(first) == 2 and not first[0].endswith((".dist-info", ".data")) \
                    and first[0] != "..":
                tops.add(site_packages / first[0])
    return sorted(p for p in tops if p.is_dir())
