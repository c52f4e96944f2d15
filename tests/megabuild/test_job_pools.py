"""The heaviest compile targets get a Ninja job pool of their own; everything else keeps MAX_JOBS.

The sizing on a written /proc/meminfo; the pool for real: the driver's split step builds the test
project (setup.py, CMake, Ninja) with one deliberately heavy target (`flash_attention`, named as
in PyTorch), every compile timed by a launcher.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from megabuild import job_pools
from megabuild.build_env import build_environment
from megabuild.errors import MegabuildError
from tests.support import compile_timeline, megabuild_harness as harness
from tests.support.paths import REPO_ROOT

pytestmark = [pytest.mark.compile, pytest.mark.download]

GIB = 1024 ** 3
CPU = {"cuda_compiler_version": "None", "blas_impl": "generic", "target_platform": "linux-64",
       "CPU_COUNT": "16", "PKG_VERSION": "2.13.0"}
BASE = {"PATH": "/usr/bin:/bin", "PREFIX": "/opt/host"}


def env_for(tmp_path: Path, gib: float, **base: str) -> dict[str, str]:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal: 99999999 kB\nMemAvailable: {int(gib * 1024 * 1024)} kB\n")
    return build_environment(CPU, {**BASE, **base}, meminfo=meminfo, src_dir=tmp_path / "src")


@pytest.mark.parametrize(("gib", "base", "jobs", "pool"), [
    (64, {}, 16, 8),                                  # 64 GiB / 8 GiB per heavy compile
    (20, {}, 6, 2),                                   # MAX_JOBS 20 // 3 = 6, pool 20 // 8 = 2
    (4, {}, 1, 1),                                    # never below one
    (64, {"FEEDSTOCK_MAX_JOBS": "3"}, 3, 3),          # FEEDSTOCK_MAX_JOBS wins: the pool never exceeds it
    (64, {"FEEDSTOCK_HEAVY_JOBS": "2"}, 16, 2),       # an explicit pool size
    (64, {"FEEDSTOCK_MAX_JOBS": "2", "FEEDSTOCK_HEAVY_JOBS": "5"}, 2, 2),
])
def test_pool_sized_from_memory(tmp_path: Path, gib: float, base: dict, jobs: int, pool: int) -> None:
    env = env_for(tmp_path, gib, **base)
    assert env["MAX_JOBS"] == str(jobs)
    assert env["CMAKE_JOB_POOLS"] == f"{job_pools.POOL_NAME}={pool}"
    assert env["CMAKE_PROJECT_INCLUDE"] == str(tmp_path / "src" / job_pools.INCLUDE_FILE)


def test_heavy_targets_are_data_with_evidence() -> None:
    assert set(job_pools.HEAVY_TARGETS) >= {"flash_attention", "fbgemm_genai"}
    for target, evidence in job_pools.HEAVY_TARGETS.items():
        # which upstream file defines it, and a public record of it running out of memory
        assert "CMakeLists.txt" in evidence and "#" in evidence, target
        assert target in job_pools.include_text()


@pytest.mark.parametrize("value", ["0", "-1"])
def test_pool_size_zero_is_one_error_line(tmp_path: Path, value: str) -> None:
    with pytest.raises(MegabuildError, match=f"FEEDSTOCK_HEAVY_JOBS={value}: the job pool"):
        env_for(tmp_path, 64, FEEDSTOCK_HEAVY_JOBS=value)
    with pytest.raises(MegabuildError, match="FEEDSTOCK_HEAVY_JOBS='two' is not a whole number"):
        env_for(tmp_path, 64, FEEDSTOCK_HEAVY_JOBS="two")
    # the driver as conda-build runs it: one line, exit 1, nothing written into the source tree
    src = harness.copy_project(tmp_path / "tree")
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    proc = subprocess.run([sys.executable, "-m", "megabuild"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "recipe"), "SRC_DIR": str(src),
                               "PREFIX": str(tmp_path / "prefix"), "PYTHON": sys.executable,
                               "PKG_NAME": "libtorch-split", "FEEDSTOCK_HEAVY_JOBS": value})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"error: FEEDSTOCK_HEAVY_JOBS={value}: the job pool {job_pools.POOL_NAME} needs at least 1 job; "
        "set 1 or more, or unset it to size the pool from memory"]
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before


def test_no_source_tree_no_pool(tmp_path: Path) -> None:
    env = build_environment(CPU, BASE, meminfo=tmp_path / "absent")
    assert "CMAKE_JOB_POOLS" not in env and "CMAKE_PROJECT_INCLUDE" not in env


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory, cpythons: dict[str, Path]) -> Path:
    try:
        harness.check_tools()
        version, exe = next(iter(cpythons.items()))
        return harness.make_venvs({version: exe}, tmp_path_factory.mktemp("pool-venv"))[version]
    except harness.HarnessUnavailable as exc:
        pytest.skip(str(exc))


def test_heavy_compiles_never_exceed_the_pool_and_light_ones_run_max_jobs_wide(
        tmp_path: Path, venv_python: Path) -> None:
    build = compile_timeline.pooled_build(venv_python, tmp_path, max_jobs=4, heavy_jobs=1)
    heavy = [c for c in build.compiles if c.heavy]
    light = [c for c in build.compiles if not c.heavy]
    assert len(heavy) == 3 and len(light) >= 12
    # the heavy units really are the memory-hungry ones
    assert min(c.peak_kib for c in heavy) > max(c.peak_kib for c in light)
    assert build.overlap(lambda c: c.heavy) == 1
    assert build.overlap(lambda c: not c.heavy) == 4
    assert build.env["CMAKE_JOB_POOLS"] == f"{job_pools.POOL_NAME}=1" and build.env["MAX_JOBS"] == "4"
    ninja = (tmp_path / "src" / "build" / "build.ninja").read_text()
    pooled = [block for block in ninja.split("\n\n") if "pool = feedstock_heavy" in block]
    assert len(pooled) == 3 and all("flash_attention.dir" in block for block in pooled)
    cache = (tmp_path / "src" / "build" / "CMakeCache.txt").read_text()
    assert f"CMAKE_JOB_POOLS:UNINITIALIZED={job_pools.POOL_NAME}=1" in cache


def test_without_the_pool_heavy_compiles_overlap(tmp_path: Path, venv_python: Path) -> None:
    """The control: a pool as wide as MAX_JOBS lets the heavy compiles run together, so the
    assertion above measures the pool, not the scheduling luck of the machine."""
    build = compile_timeline.pooled_build(venv_python, tmp_path, max_jobs=4, heavy_jobs=4,
                                          core_units=2)
    assert build.overlap(lambda c: c.heavy) >= 2
