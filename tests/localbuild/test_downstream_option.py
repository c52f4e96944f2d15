"""build-locally.py --downstream: after the batch, `python -m feedstock downstream` against
build_artifacts/ runs in the feedstock's Python (the fake engine's batch, a real child process)."""
from __future__ import annotations

import shutil
import sys

from tests.support.build_locally import make_feedstock
from tests.support.paths import REPO_ROOT

CPU = "linux_64_blas_implgenericcuda_compiler_versionNone"


def _with_feedstock_tools(tmp_path):
    fs = make_feedstock(tmp_path, {CPU: dict(blas="generic")})
    shutil.copytree(REPO_ROOT / "feedstock", fs.root / "feedstock", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO_ROOT / "recipe" / "dependents.yaml", fs.root / "recipe" / "dependents.yaml")
    return fs


def test_dry_run_shows_the_command_it_would_run_after_the_batch(tmp_path):
    fs = _with_feedstock_tools(tmp_path)
    proc = fs.run(CPU, "--dry-run", "--downstream", env=fs.env(RATTLER_BUILD_PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("after the batch: "))
    assert line == (f"after the batch: {sys.executable} -m feedstock --feedstock-root {fs.root} downstream "
                    f"--channel {fs.artifacts}")
    assert not fs.artifacts.exists()


def test_downstream_runs_after_the_batch_and_prints_its_table(tmp_path):
    fs = _with_feedstock_tools(tmp_path)
    proc = fs.run(CPU, "--min-free-gb", "0", "--downstream", env=fs.env(RATTLER_BUILD_PYTHON=sys.executable),
                  timeout=300)
    # the fake engine's packages are not real .conda files: the channel cannot be indexed, which
    # the dependents' command says in one line, its table still printed; the batch itself passed
    assert fs.marker(CPU).exists()
    assert f"downstream: {sys.executable} -m feedstock" in proc.stdout
    assert f"error: cannot index the channel {fs.artifacts}" in proc.stderr
    assert "| torch-scatter " in proc.stdout and proc.stdout.rstrip().endswith("downstream: 6 dependents, 0 passed")
    assert proc.returncode == 3
