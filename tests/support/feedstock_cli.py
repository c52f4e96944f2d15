"""``python -m feedstock`` run as a user runs it, and what the maintainer-tool tests copy or compare."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT

FEEDSTOCK_INPUTS = ("recipe", "pinning.yaml", "conda-forge.yml", "ci-runners.yml", ".ci_support", ".github")


def run_feedstock_cli(*args: str, root: Path = REPO_ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m feedstock --feedstock-root ROOT ARGS`` as a user runs it (real process)."""
    return subprocess.run(
        [sys.executable, "-m", "feedstock", "--feedstock-root", str(root), *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, **(env or {})},
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file directly in ``folder``, name -> bytes (to assert a command wrote nothing)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
