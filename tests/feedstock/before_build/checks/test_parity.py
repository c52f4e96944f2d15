"""``python -m feedstock parity``: meta.yaml (our renderer) against recipe.yaml (rattler-build's).

The committed recipes agree; a one-line drift in either recipe fails and the line names it,
including a skip on a platform that has no job.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from feedstock.platforms import KNOWN_SUBDIRS
from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.paths import REPO_ROOT

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")

from feedstock.before_build.checks.parity import parity  # noqa: E402

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
    lines = proc.stdout.strip().splitlines()
    jobs = len(list((REPO_ROOT / ".ci_support").glob("*.yaml")))
    match = re.fullmatch(rf"parity: {jobs} configs, (\d+) outputs: (\d+) equal, 0 differ; "
                         rf"skips on {len(KNOWN_SUBDIRS)} platforms: 0 differ", lines[-1])
    assert match, lines[-1]
    assert int(match[1]) == int(match[2]) >= 70  # 196 outputs over 13 jobs today
    assert len(lines) == 2, lines  # the timing line and the summary: no difference anywhere


def test_failing_run_summary_counts_the_differing_outputs(feedstock_copy):
    replace_once(feedstock_copy / "recipe" / "recipe.yaml", "        - pkg-config\n", "        - pkgconf\n", 2)
    proc = run_feedstock_cli("parity", root=feedstock_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"parity: \d+ configs, (\d+) outputs: (\d+) equal, (\d+) differ; "
                         r"skips on \d+ platforms: 0 differ", last)
    assert match, last
    outputs, equal, differ = map(int, match.groups())
    assert differ > 0 and equal + differ == outputs
    # every pytorch output of every job: one pytorch output per Python in each job
    differing = {line.split(": ")[1] + ": " + line.split(": ")[2] for line in proc.stdout.splitlines()
                 if "requirements/build" in line}
    assert len(differing) == differ, (differing, last)


def test_skip_on_a_platform_without_a_job(feedstock_copy):
    # meta.yaml stops building for macOS (and, as the selector no longer names win, starts on
    # Windows); recipe.yaml still says skip: [win, osx and x86_64]. The osx job is gone, as
    # rerender removes it, and Windows never had one: no job compares either platform.
    replace_once(feedstock_copy / "recipe" / "meta.yaml", "  skip: true  # [win or (osx and x86_64)]\n",
                 "  skip: true  # [osx]\n")
    (feedstock_copy / ".ci_support" / "osx_arm64_.yaml").unlink()
    proc = run_feedstock_cli("parity", root=feedstock_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    for name in ("libtorch", "pytorch", "pytorch-cpu", "pytorch-tests"):
        assert f"parity: {name} on osx-arm64: meta.yaml skips it, recipe.yaml builds it" in lines, lines
        assert f"parity: {name} on win-64: meta.yaml builds it, recipe.yaml skips it" in lines, lines
    # osx-64 is skipped by both, Linux is unchanged; the jobs that are left agree
    assert not [line for line in lines if "osx-64" in line or "linux" in line], lines
    assert re.fullmatch(r"parity: 12 configs, (\d+) outputs: \1 equal, 0 differ; "
                        rf"skips on {len(KNOWN_SUBDIRS)} platforms: 16 differ", lines[-1]), lines[-1]


def test_skip_in_some_variants_of_a_platform(feedstock_copy):
    # meta.yaml drops the MKL flavours of libtorch-cuda-linalg: same platform, fewer variants
    replace_once(feedstock_copy / "recipe" / "meta.yaml",
                 '      {% if gpu_backend != "cuda" %}\n      skip: true\n',
                 '      {% if gpu_backend != "cuda" or blas_impl == "mkl" %}\n      skip: true\n')
    report = parity(feedstock_copy)
    skips = [line for line in report.differences if " on linux-64: " in line]
    assert len(skips) == 1 and report.skip_differences == 1, report.differences
    assert skips[0].startswith("libtorch-cuda-linalg on linux-64: meta.yaml builds it in 24 of 96 variants, "
                               "recipe.yaml in 48; only recipe.yaml builds it for blas_impl=mkl "), skips


def test_named_jobs_leave_the_platforms_out():
    report = parity(REPO_ROOT, [CPU_JOB])
    assert report.platforms == 0 and report.summary.endswith(" 0 differ") and "skips" not in report.summary


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


def test_script_env_drift(feedstock_copy):
    """What a build script takes from the environment is compared: meta.yaml's script_env as
    conda-build reads it against recipe.yaml's env.get(...) entries and secrets."""
    line = '          CCACHE_DIR: ${{ env.get("CCACHE_DIR", default="") }}\n'
    replace_once(feedstock_copy / "recipe" / "recipe.yaml", line, "", 2)   # the libtorch output's
    lines = differences(feedstock_copy, CPU_JOB)
    assert lines and all("libtorch cpu_mkl_h<hash>_100" in entry for entry in lines), lines
    assert any("script env (from the environment): 'CCACHE_DIR' only in meta.yaml" in entry for entry in lines)
