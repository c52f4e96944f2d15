"""build-locally.py --scheduler slurm on a real one-node Slurm 22.05 (tests/support/slurm_cluster.py):
the test project's recipe.yaml built natively by rattler-build against the local toolchain
channel, as a job array of four configs: a pair that builds, one that fails at once, one
cancelled while it runs; a final afterany job indexes build_artifacts/ once.
(The good pair differs in its Python: the cpu/mkl job does not resolve against the toolchain's
stand-ins yet, see tests/support/cluster_build.py.)

One submission per module (minutes); the other tests read what it left, then submit again.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.cluster_build import (CANCELLED, FAILING, GENERIC, GENERIC_OTHER, ClusterFeedstock,
                                         ccache_counts, cluster_feedstock)
from tests.support.paths import RECIPE_VERSION
from tests.support.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_cluster, slurm_unavailable

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.slurm, pytest.mark.download]

CONFIGS = (GENERIC, GENERIC_OTHER, FAILING, CANCELLED)


@dataclass
class Run:
    fs: ClusterFeedstock
    cluster: SlurmCluster
    env: dict[str, str]
    returncode: int
    output: str
    seconds: float
    cache: Path

    def args(self, *extra: str) -> list[str]:
        channels = [arg for channel in self.fs.channels for arg in ("--channel", str(channel))]
        return [sys.executable, str(self.fs.root / "build-locally.py"), *CONFIGS, "--scheduler",
                "slurm", "--partition", self.cluster.partition, "--cpus-per-task", "1",
                "--time", "30:00", "--tool", "rattler-build", "--skip-tests", "--min-free-gb", "1",
                "--compile-cache", str(self.cache), *channels, *extra]


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen, out: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"build-locally ended ({proc.returncode}) before {what}:\n"
                                 + out.read_text()[-3000:])
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f} s:\n" + out.read_text()[-3000:])
        time.sleep(0.5)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, realbuild_toolchain: dict) -> Iterator[Run]:
    reason = slurm_unavailable()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("slurm")
    fs = cluster_feedstock(work, realbuild_toolchain)
    try:
        with slurm_cluster(work / "slurm") as cluster:
            env = dict(cluster.env, RATTLER_BUILD_PYTHON=sys.executable)
            probe = Run(fs, cluster, env, 0, "", 0.0, work / "ccache")
            out = work / "first-run.txt"
            started = time.monotonic()
            with out.open("w") as sink:
                proc = subprocess.Popen(probe.args("--wait"), cwd=fs.root, env=env, stdout=sink,
                                        stderr=subprocess.STDOUT, text=True)
            try:
                # cancel the fourth task once its build is under way
                _wait_for(lambda: "::build-locally-step:: build recipe" in _text(fs.log(CANCELLED)),
                          900, f"a running build of {CANCELLED}", proc, out)
                array_id = re.search(r"submitted array job (\d+)", out.read_text()).group(1)
                cancel = cluster.run("scancel", f"{array_id}_{CONFIGS.index(CANCELLED)}")
                assert cancel.returncode == 0, cancel.stderr
                proc.wait(timeout=900)
            finally:
                if proc.poll() is None:
                    proc.kill()
            yield Run(fs, cluster, env, proc.returncode, out.read_text(),
                      time.monotonic() - started, work / "ccache")
    except SlurmUnavailable as err:
        pytest.skip(str(err))


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def test_the_summary_and_exit_status_are_a_local_batch_s(run):
    out = run.output
    assert run.returncode == 1, out[-3000:]
    summary = out[out.index("summary: 4 config(s)"):]
    rows = {line.split()[0]: line for line in summary.splitlines()[2:6]}
    assert rows[GENERIC].split()[1] == "ok" and rows[GENERIC_OTHER].split()[1] == "ok", summary
    assert rows[FAILING].split()[1] == "failed", summary
    assert rows[CANCELLED].split()[1] == "cancelled", summary
    assert f"log of failed {FAILING}: {run.fs.log(FAILING)}" in summary
    # each row counts its own packages (libtorch, pytorch, pytorch-cpu, pytorch-tests), not
    # the ones a sibling moved into build_artifacts/ meanwhile
    assert rows[GENERIC].split()[3] == "4" and rows[GENERIC_OTHER].split()[3] == "4", summary
    assert rows[FAILING].split()[-1] == "0", summary
    # progress lines while waiting: each task's state changes
    assert re.search(rf"\[1/4 {GENERIC}\] RUNNING", out) and re.search(rf"\[3/4 {FAILING}\] FAILED", out)
    assert re.search(rf"\[4/4 {CANCELLED}\] CANCELLED", out), out[-3000:]
    print(f"slurm array of 4 configs: {run.seconds:.0f} s")


def test_logs_markers_and_the_failing_config_s_reason(run):
    for config in (GENERIC, GENERIC_OTHER):
        log = _text(run.fs.log(config))
        assert "::build-locally-step:: build recipe" in log and "::build-locally-step:: done" in log
        assert "SKIP_INDEX=1" in log          # the tasks leave indexing to the final job
        assert run.fs.marker(config).exists()
    for config in (FAILING, CANCELLED):
        assert not run.fs.marker(config).exists()
    # rattler-build's own error line, in the config's log
    assert "error: rattler-build failed: Failed to resolve dependencies" in _text(run.fs.log(FAILING))
    assert "::build-locally-step:: done" not in _text(run.fs.log(CANCELLED))


def test_the_final_job_indexed_both_good_configs_packages(run):
    repodata = json.loads((run.fs.artifacts / "linux-64" / "repodata.json").read_text())
    names = sorted(repodata["packages.conda"])
    assert any(n.startswith(f"libtorch-{RECIPE_VERSION}-cpu_generic_h") for n in names), names
    for py in ("312", "311"):   # the extension of each good config
        assert any(n.startswith(f"pytorch-{RECIPE_VERSION}-cpu_generic_py{py}_h") for n in names), names
    on_disk = sorted(p.name for p in (run.fs.artifacts / "linux-64").glob("*.conda"))
    assert names == on_disk
    [summary] = run.fs.artifacts.glob("slurm-*-summary.txt")
    assert summary.read_text().startswith("summary: 4 config(s)")


def test_every_task_used_the_one_compile_cache(run):
    [job] = (run.fs.artifacts / "slurm").glob("*/job.json")
    # every task builds with the submitter's options, the cache among them
    assert json.loads(job.read_text())["build_request"]["compile_cache"] == str(run.cache)
    compiles, hits = ccache_counts(run.cache)
    # the pair ran side by side (one core each), so the second may reuse what the first stored
    assert compiles >= 10, (compiles, hits)
    print(f"shared cache: {compiles} compiles, {hits} hits")


def test_a_second_run_submits_only_the_configs_without_a_marker(run):
    proc = subprocess.run(run.args(), cwd=run.fs.root, env=run.env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"not submitted: {GENERIC}: skipped (done)" in proc.stdout
    assert f"not submitted: {GENERIC_OTHER}: skipped (done)" in proc.stdout
    array_id = re.search(r"submitted array job (\d+) \(2 task\(s\)\)", proc.stdout).group(1)
    run.cluster.run("scancel", array_id)
    [job_dir] = [d for d in (run.fs.artifacts / "slurm").iterdir()
                 if _text(d / "final.sh").rstrip().endswith(f" {array_id}")]
    assert json.loads((job_dir / "job.json").read_text())["configs"] == [FAILING, CANCELLED]


def test_an_unknown_partition_is_the_controller_s_answer_in_one_line(run):
    args = [a if a != run.cluster.partition else "nosuchpartition" for a in run.args()]
    proc = subprocess.run(args + ["--force"], cwd=run.fs.root, env=run.env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == ["error: Slurm refuses these job options: sbatch: error: invalid partition "
                     "specified: nosuchpartition"], lines
