"""``python -m feedstock parity``: meta.yaml (our renderer) against recipe.yaml (rattler-build's).

The committed recipes agree; a one-line drift in either recipe fails and the line names it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.feedstock_cli import run_feedstock_cli

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")

from feedstock.checks.parity import parity  # noqa: E402

CUDA_JOB = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_version12.9gpu_backendcudarocm_versionNone"
CPU_JOB = "linux_64_blas_implmklc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"


def replace_once(path: Path, old: str, new: str, occurrence: int = 1) -> None:
    """Replace the n-th occurrence of `old` (a one-line drift)."""
    text = path.read_text()
    index = -1
    for _ in range(occurrence):
        index = text.index(old, index + 1)
    path.write_text(text[:index] + new + text[index + len(old):])


def differences(root: Path, job: str = CUDA_JOB) -> list[str]:
    return parity(root, [job]).differences


def test_committed_recipes_are_equal():
    proc = run_feedstock_cli("parity")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    jobs = len(list((Path(__file__).resolve().parents[3] / ".ci_support").glob("*.yaml")))
    assert last.startswith(f"parity: {jobs} configs, ")
    assert int(last.split(", ")[1].split()[0]) >= 70  # 78 outputs over 10 jobs today


def test_lint_runs_parity(feedstock_copy):
    replace_once(feedstock_copy / "recipe" / "recipe.yaml", "        - pkg-config\n", "        - pkgconf\n", 2)
    proc = run_feedstock_cli("lint", root=feedstock_copy)
    assert proc.returncode == 1
    assert "parity: " in proc.stdout and "'pkgconf' only in recipe.yaml" in proc.stdout


def test_requirement_drift_in_recipe_yaml(feedstock_copy):
    # the pytorch output's build list (second pkg-config in the file)
    replace_once(feedstock_copy / "recipe" / "recipe.yaml", "        - pkg-config\n", "        - pkgconf\n", 2)
    lines = differences(feedstock_copy)
    assert lines, "parity missed a renamed build requirement"
    assert all("pytorch cuda129_generic_py3" in line for line in lines), lines
    assert any("requirements/build: 'pkg-config' only in meta.yaml" in line for line in lines)
    assert any("requirements/build: 'pkgconf' only in recipe.yaml" in line for line in lines)


def test_requirement_drift_in_meta_yaml(feedstock_copy):
    replace_once(feedstock_copy / "recipe" / "meta.yaml", "        - fsspec >=0.8.5\n",
                 "        - fsspec >=2023.1\n")
    lines = differences(feedstock_copy, CPU_JOB)
    assert any("pytorch cpu_mkl_py310" in line and
               "requirements/run: 'fsspec >=2023.1' only in meta.yaml" in line for line in lines), lines


def test_test_command_drift(feedstock_copy):
    replace_once(feedstock_copy / "recipe" / "recipe.yaml", "          - torchrun --help\n",
                 "          - torchrun --version\n")
    lines = differences(feedstock_copy, CPU_JOB)
    assert any("test command: 'torchrun --help' only in meta.yaml" in line for line in lines), lines
    assert any("test command: 'torchrun --version' only in recipe.yaml" in line for line in lines)


def test_build_string_drift(feedstock_copy):
    # the linalg flavour word changes in recipe.yaml only: both outputs appear on one side only
    replace_once(feedstock_copy / "recipe" / "recipe.yaml", '"magma" if', '"withmagma" if')
    lines = differences(feedstock_copy)
    assert any("libtorch-cuda-linalg cuda129_magma_generic_h<hash>_200: only in meta.yaml" in line
               for line in lines), lines
    assert any("libtorch-cuda-linalg cuda129_withmagma_generic_h<hash>_200: only in recipe.yaml" in line
               for line in lines), lines


def test_build_number_drift(feedstock_copy):
    replace_once(feedstock_copy / "recipe" / "meta.yaml", "{% set build = build + 100 %}",
                 "{% set build = build + 50 %}")
    lines = differences(feedstock_copy, CPU_JOB)
    assert any("cpu_mkl" in line and "only in meta.yaml" in line for line in lines), lines


def test_recipe_yaml_syntax_error_is_one_line(feedstock_copy):
    recipe = feedstock_copy / "recipe" / "recipe.yaml"
    replace_once(recipe, "  version: ${{ version }}\n", "  version: ${{ version }\n")
    before = recipe.read_bytes()
    proc = run_feedstock_cli("parity", root=feedstock_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "recipe.yaml" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert recipe.read_bytes() == before
