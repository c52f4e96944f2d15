"""A copy of the feedstock's inputs (recipe, pinning, conda-forge.yml, .ci_support, ...) to break
on purpose or to bump, for the tests and the bump benchmark."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterable

from tests.support.feedstock_cli import FEEDSTOCK_INPUTS
from tests.support.paths import REPO_ROOT


def copy_feedstock(dest: Path, names: Iterable[str] = FEEDSTOCK_INPUTS, source: Path = REPO_ROOT) -> Path:
    """``dest`` made and filled with each of ``names`` that exists under ``source``."""
    dest.mkdir(parents=True)
    for name in names:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            shutil.copy2(src, dest / name)
    return dest
