"""`--scheduler slurm --wait` on a real one-node Slurm, with builds that cost nothing (the fake
container engine sleeps or succeeds at once): Ctrl-C while waiting cancels the array and the
final job; tasks that end by themselves are summarised by the final job."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.build_locally import make_feedstock
from tests.support.slurm_cluster import SlurmUnavailable, slurm_cluster, slurm_unavailable

CONFIGS = ("linux_64_blas_implgenericcuda_compiler_versionNone",
           "linux_64_blas_implmklcuda_compiler_versionNone")


@pytest.fixture
def cluster(tmp_path):
    reason = slurm_unavailable()
    if reason:
        pytest.skip(reason)
    try:
        with slurm_cluster(tmp_path / "slurm") as running:
            yield running
    except SlurmUnavailable as err:
        pytest.skip(str(err))


def test_ctrl_c_while_waiting_cancels_the_array_and_the_final_job(tmp_path, cluster):
    fs = make_feedstock(tmp_path)
    ready = tmp_path / "ready"
    env = dict(fs.env(FAKE_DOCKER_PLAN=json.dumps({"*": "sleep"}), FAKE_DOCKER_READY=str(ready)),
               SLURM_CONF=str(cluster.conf))
    out = tmp_path / "out.txt"
    with out.open("w") as sink:
        proc = subprocess.Popen([sys.executable, str(fs.root / "build-locally.py"), *CONFIGS,
                                 "--scheduler", "slurm", "--engine", "docker", "--cpus-per-task",
                                 "1", "--min-free-gb", "0", "--wait"],
                                cwd=fs.root, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "RUNNING" not in out.read_text() or not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.read_text()
    array_id, final_id = (text.split("submitted array job ")[1].split()[0],
                          text.split("and final job ")[1].split()[0])
    assert f"interrupted: cancelled array job {array_id} and final job {final_id}" in text
    shown = cluster.run("scontrol", "-o", "show", "job", array_id).stdout
    final = cluster.run("scontrol", "-o", "show", "job", final_id).stdout
    deadline = time.monotonic() + 30
    while ("JobState=RUNNING" in shown or "JobState=COMPLETING" in shown) and time.monotonic() < deadline:
        time.sleep(0.5)
        shown = cluster.run("scontrol", "-o", "show", "job", array_id).stdout
    assert shown.count("JobState=CANCELLED") == 2, shown
    assert "JobState=CANCELLED" in final, final
    for config in CONFIGS:
        assert not fs.marker(config).exists()


def test_no_wait_submits_and_the_final_job_summarises(tmp_path, cluster):
    fs = make_feedstock(tmp_path)
    env = dict(fs.env(FAKE_DOCKER_PLAN=json.dumps({CONFIGS[0]: "succeed", "*": "fail"})),
               SLURM_CONF=str(cluster.conf))
    proc = subprocess.run([sys.executable, str(fs.root / "build-locally.py"), *CONFIGS,
                           "--scheduler", "slurm", "--engine", "docker", "--min-free-gb", "0"],
                          cwd=fs.root, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    array_id = proc.stdout.split("submitted array job ")[1].split()[0]
    assert f"follow it: squeue -j {array_id}," in proc.stdout
    summary = fs.artifacts / f"slurm-{array_id}-summary.txt"
    deadline = time.monotonic() + 60
    while not summary.exists():
        assert time.monotonic() < deadline, "the final job wrote no summary"
        time.sleep(0.2)
    text = summary.read_text()
    assert text.startswith("summary: 2 config(s): 1 ok, 1 failed"), text
    assert f"log of failed {CONFIGS[1]}: {fs.artifacts / (CONFIGS[1] + '-log.txt')}" in text
    # the index step ran once, in the final job, through the same engine as the builds
    runs = [call for call in fs.runs() if "INDEX_ONLY=1" in call["argv"]]
    assert runs and runs[0]["argv"][:2] == ["run", "--rm"]   # no container left behind
    assert len(runs) == 1, [call["argv"] for call in fs.runs()]
    assert all("SKIP_INDEX=1" in call["argv"] for call in fs.runs() if call not in runs)
    assert Path(fs.marker(CONFIGS[0])).exists() and not fs.marker(CONFIGS[1]).exists()
