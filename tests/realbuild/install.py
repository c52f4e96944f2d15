"""Solve from a local channel with py-rattler, install into a fresh prefix, check the result.

`install_from_channel` indexes the channel (rattler.index), solves the specs from it alone
(with `__cuda` overridden when a CUDA flavour is asked for) and installs into `prefix`.
The checks (`files_in_two_packages`, `leaked_paths`, `escaping_symlinks`, `absolute_rpaths`)
read the prefix's
conda-meta records, so they see what the packages installed, not what a build left behind.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path

from tests.support.toolchain import index_channel


class SolveError(Exception):
    """The channel cannot satisfy the specs; str() is one line naming what is missing."""


def _await(value):
    return asyncio.run(value) if asyncio.iscoroutine(value) else value


def virtual_packages(cuda: str | None):
    """This machine's virtual packages; `cuda` overrides `__cuda` (a version, or "" for none,
    as CONDA_OVERRIDE_CUDA="" does, also where a driver is present)."""
    import rattler

    overrides = rattler.VirtualPackageOverrides()
    if cuda is not None:
        overrides.cuda = rattler.Override.string(cuda)
    return rattler.VirtualPackage.detect(overrides)


def solve(channels: list[Path], specs: list[str], cuda: str | None = None):
    import rattler

    for channel in channels:
        index_channel(channel)
    try:
        return _await(rattler.solve(sources=[rattler.Channel(c.resolve().as_uri()) for c in channels],
                                    specs=specs,
                                    platforms=["linux-64", "noarch"],
                                    virtual_packages=virtual_packages(cuda)))
    except Exception as err:  # rattler raises SolverError; its text spans lines
        raise SolveError(" ".join(str(err).split())[:500]) from None


def install_from_channel(channel: Path, specs: list[str], prefix: Path, cuda: str | None = None,
                         cache: Path | None = None, extra_channels: list[Path] | None = None) -> list:
    import rattler

    records = solve([channel, *(extra_channels or [])], specs, cuda)
    _await(rattler.install(records, target_prefix=prefix, cache_dir=cache, show_progress=False))
    return records


def run_clean(cmd: list, env_extra: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run a command of an installed prefix in a clean environment (not the test venv's); assert success."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(env_extra or {})
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    return proc


def installed_files(prefix: Path) -> dict[str, list[str]]:
    """package name -> files it installed (relative paths), from conda-meta."""
    files: dict[str, list[str]] = {}
    for record in sorted((prefix / "conda-meta").glob("*.json")):
        data = json.loads(record.read_text())
        if "name" in data:
            files[data["name"]] = list(data.get("files") or [])
    return files


def files_in_two_packages(prefix: Path) -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for name, paths in installed_files(prefix).items():
        for path in paths:
            owners.setdefault(path, []).append(name)
    return {path: names for path, names in owners.items() if len(names) > 1}


def _is_text(data: bytes) -> bool:
    return b"\0" not in data[:8192]


def package_paths(prefix: Path, packages: set[str] | None = None):
    """(package name, relative path, path) for every installed file of `packages` (default all)."""
    for name, paths in installed_files(prefix).items():
        if packages is None or name in packages:
            for rel in paths:
                yield name, rel, prefix / rel


def leaked_paths(prefix: Path, needles: list[str], packages: set[str] | None = None) -> list[str]:
    """Installed text files (of `packages`, default all) that mention any of `needles`."""
    found = []
    raw = [n.encode() for n in needles if n]
    for name, rel, path in package_paths(prefix, packages):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if not _is_text(data):
            continue
        hits = [n.decode() for n in raw if n in data]
        if hits:
            found.append(f"{name}: {rel} mentions {hits[0]}")
    return found


def escaping_symlinks(prefix: Path, packages: set[str] | None = None) -> list[str]:
    """Symlinks (of `packages`) that do not resolve to an existing path inside the prefix."""
    root = prefix.resolve()
    bad = []
    for name, rel, path in package_paths(prefix, packages):
        if not path.is_symlink():
            continue
        target = Path(os.path.realpath(path))
        if not target.exists() or not target.is_relative_to(root):
            bad.append(f"{name}: {rel} -> {os.readlink(path)}")
    return bad


def run_path_entries(prefix: Path, packages: set[str] | None = None):
    """(package, relative path, path, entry) for every RPATH/RUNPATH entry of the installed
    ELF files of `packages` (default all)."""
    for name, rel, path in package_paths(prefix, packages):
        if path.is_symlink() or not path.is_file():
            continue
        with path.open("rb") as fh:
            if fh.read(4) != b"\x7fELF":
                continue
        dynamic = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
        for entries in re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.*)\]", dynamic):
            for entry in filter(None, entries.split(":")):
                yield name, rel, path, entry


def absolute_rpaths(prefix: Path, packages: set[str] | None = None) -> list[str]:
    """ELF files (of `packages`) whose RPATH/RUNPATH names a directory other than through
    $ORIGIN: a build machine's path (the build prefix, /usr/local/cuda) in the package."""
    return [f"{name}: {rel} has {entry}" for name, rel, _, entry in run_path_entries(prefix, packages)
            if not entry.startswith("$ORIGIN")]


def run_paths_outside(prefix: Path, packages: set[str] | None = None) -> list[str]:
    """ELF files (of `packages`) with an RPATH/RUNPATH entry that is absolute, resolves outside
    the prefix, or leads into site-packages/nvidia (where pip, not conda, puts CUDA libraries)."""
    root = prefix.resolve()
    bad = []
    for name, rel, path, entry in run_path_entries(prefix, packages):
        resolved = Path(os.path.normpath(entry.replace("$ORIGIN", str(path.parent))))
        if not entry.startswith("$ORIGIN") or not resolved.is_relative_to(root) \
                or "site-packages/nvidia" in resolved.as_posix():
            bad.append(f"{name}: {rel} has {entry}")
    return bad
