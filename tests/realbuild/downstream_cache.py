"""The `downstream --cache` folder the dependents modules share within one run.

Its packages/ (a dependent built against a pytorch package file, keyed by that file's sha256)
is the run's own: the session's packages come from the machine's cache (the same files every
run), so a lasting packages/ would serve torch-scatter without compiling it, and the modules
that prove the compile would prove nothing. Its sources/ (the PyPI files, checked by sha256) is
the machine's, downloaded once."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.shared_fixture import shared_root


def run_downstream_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from feedstock.after_build.downstream.sources import default_cache

    folder = shared_root(tmp_path_factory) / "downstream-cache"
    folder.mkdir(exist_ok=True)
    machine_sources = default_cache() / "sources"
    machine_sources.mkdir(parents=True, exist_ok=True)
    try:
        (folder / "sources").symlink_to(machine_sources, target_is_directory=True)
    except FileExistsError:   # the other worker made it
        pass
    return folder
