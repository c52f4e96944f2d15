"""Disk hygiene for a suite that would otherwise hold about 60 GB at its end (now it peaks at about
35 GB): big module folders go when their module is done, and nothing mounted is left behind in
the run's folder.

CI runs on a machine whose free disk is shared with whatever was left in /tmp before it. A run
that passes leaves nothing (pytest.ini's tmp_path_retention_policy = failed removes its base
folder), but only if no mount holds part of it: podman's overlay store bind-mounts a folder of its
own, and a test killed midway leaves that mount.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from common.mounts import is_at_or_below, mounts


def module_scratch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                   name: str) -> Path:
    """A folder for a module-scoped fixture, removed at the fixture's teardown unless a test of
    this worker has failed by then (its files are then what a person reads)."""
    path = tmp_path_factory.mktemp(name)

    def remove() -> None:
        if request.session.testsfailed == 0:
            unmount_under(path)
            shutil.rmtree(path, ignore_errors=True)

    request.addfinalizer(remove)
    return path


def mounts_under(folder: Path) -> list[str]:
    """The mount points at or below folder, deepest first (the order to unmount them in)."""
    prefix = str(folder.resolve())
    found = {entry.point for entry in mounts() if is_at_or_below(entry.point, prefix)}
    return sorted(found, key=len, reverse=True)


def unmount_under(folder: Path) -> list[str]:
    """Lazily unmount every mount at or below folder; returns those that would not go."""
    stuck = []
    for point in mounts_under(folder):
        proc = subprocess.run(["umount", "-l", point], capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            stuck.append(f"{point}: {proc.stderr.strip()}")
    return stuck
