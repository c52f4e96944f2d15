"""Two build-locally.py runs on one build_artifacts/: the lock makes the second wait (or, with
--no-wait, refuse), so markers, logs and the channel index are never written by both at once.

Real processes: build-locally.py -> fake `docker run` -> localbuild/in_container/build_steps.sh -> fake conda,
whose `conda index` lists the channel, works a while, then writes repodata.json (and records
whether another indexer was running meanwhile).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.support.build_locally import fake_conda_packages, install_fake_conda, make_feedstock, read_jsonl

CUDA129 = "linux_64_blas_implmklcuda_compiler_version12.9"
CUDA130 = "linux_64_blas_implmklcuda_compiler_version13.0"
CPU_MKL = "linux_64_blas_implmklcuda_compiler_versionNone"
CPU_GENERIC = "linux_64_blas_implgenericcuda_compiler_versionNone"
SINCE = r"since \d\d:\d\d"


@pytest.fixture
def fs(tmp_path):
    fs = make_feedstock(tmp_path)
    install_fake_conda(fs.bin_dir)
    return fs


def start(fs, *args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-S", str(fs.root / "build-locally.py"), *args],
                            cwd=fs.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def holder(fs) -> dict:
    """The lock file's note (empty: nobody holds it, or the holder is still writing it)."""
    try:
        return json.loads((fs.artifacts / ".build-locally.lock").read_text() or "{}")
    except (FileNotFoundError, ValueError):
        return {}


def wait_until(condition, proc: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


def test_second_run_waits_and_both_runs_packages_are_indexed(fs, tmp_path):
    conda_log = tmp_path / "conda-calls.jsonl"
    env = fs.env(FAKE_DOCKER_PLAN=json.dumps({"*": "exec"}), FAKE_CONDA_LOG=str(conda_log),
                 FAKE_CONDA_BUILD_SECONDS="1", FAKE_CONDA_INDEX_SECONDS="0.5")
    first = start(fs, CPU_MKL, CPU_GENERIC, "--min-free-gb", "0", env=env)
    wait_until(lambda: holder(fs).get("pid") == first.pid, first)
    second = start(fs, CUDA129, CUDA130, "--min-free-gb", "0", env=env)
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, out1 + err1 + out2 + err2

    waiting = [line for line in out2.splitlines() if "waiting for" in line]
    assert len(waiting) == 1, out2
    assert re.fullmatch(
        rf"build-locally: waiting for build_artifacts/ lock held by pid {first.pid} on host "
        rf"{re.escape(socket.gethostname())} \(build-locally.py {CPU_MKL} {CPU_GENERIC} "
        rf"--min-free-gb 0, {SINCE}\)", waiting[0]), waiting[0]
    assert "waiting for" not in out1
    # one run after the other: every conda call of the first run comes before the second's
    calls = read_jsonl(conda_log)
    order = [call["env"]["CONFIG"] for call in calls]
    assert order == sorted(order, key=lambda config: config not in (CPU_MKL, CPU_GENERIC)), order
    indexes = [call for call in calls if call["argv"][0] == "index" and "--help" not in call["argv"]]
    assert len(indexes) == 4 and not any(call["index_overlap"] for call in indexes)
    # the channel lists every package of both runs
    repodata = json.loads((fs.artifacts / "linux-64" / "repodata.json").read_text())
    expected = {name for config in (CPU_MKL, CPU_GENERIC, CUDA129, CUDA130)
                for name in fake_conda_packages(config)}
    assert set(repodata["packages.conda"]) == expected
    assert all(fs.marker(config).exists() for config in (CPU_MKL, CPU_GENERIC, CUDA129, CUDA130))
    assert holder(fs) == {}   # released: no stale note


def test_no_wait_refuses_in_one_line_and_dry_run_takes_no_lock(fs, tmp_path):
    ready = tmp_path / "ready"
    env = fs.env(FAKE_DOCKER_PLAN=json.dumps({CPU_MKL: "sleep", "*": "succeed"}),
                 FAKE_DOCKER_READY=str(ready))
    first = start(fs, "--all", "--filter", "mkl", "--min-free-gb", "0", env=env)
    try:
        wait_until(ready.exists, first)
        log_before = (fs.artifacts / f"{CPU_MKL}-log.txt").read_bytes()

        refused = fs.run(CPU_GENERIC, "--no-wait", "--min-free-gb", "0", env=env)
        assert refused.returncode == 4, refused.stdout + refused.stderr
        assert re.fullmatch(
            rf"error: build_artifacts/ is locked by pid {first.pid} on host "
            rf"{re.escape(socket.gethostname())} \(build-locally.py --all --filter mkl "
            rf"--min-free-gb 0, {SINCE}\); wait for it to finish, or run without --no-wait to "
            r"queue behind it\n", refused.stderr), refused.stderr
        assert refused.stdout == ""
        assert [run["config"] for run in fs.runs()] == [CUDA129, CUDA130, CPU_MKL]   # the first's only
        assert not fs.marker(CPU_GENERIC).exists()

        dry = fs.run(CPU_GENERIC, "--dry-run", "--no-wait", timeout=20)
        assert dry.returncode == 0 and "waiting" not in dry.stdout, dry.stderr

        assert (fs.artifacts / f"{CPU_MKL}-log.txt").read_bytes() == log_before
    finally:
        os.killpg(first.pid, signal.SIGINT)
        first.communicate(timeout=60)
    assert first.returncode == 130

    # the lock went with the first run: --no-wait now builds
    done = fs.run(CPU_GENERIC, "--no-wait", "--min-free-gb", "0", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fs.marker(CPU_GENERIC).exists()


def test_killed_holder_leaves_no_stale_lock_and_its_build_keeps_none(fs, tmp_path):
    """kill -9 of build-locally.py: the kernel drops the lock, even though the build process it
    started lives on (the lock's file descriptor is not inherited)."""
    ready = tmp_path / "ready"
    env = fs.env(FAKE_DOCKER_PLAN=json.dumps({CPU_MKL: "sleep", "*": "succeed"}),
                 FAKE_DOCKER_READY=str(ready))
    first = start(fs, CPU_MKL, "--min-free-gb", "0", env=env)
    wait_until(ready.exists, first)
    orphan = int(ready.read_text())
    try:
        first.kill()
        first.communicate(timeout=30)
        os.kill(orphan, 0)   # the fake engine client still runs
        assert holder(fs).get("pid") == first.pid   # the note stays; only the lock matters
        proc = fs.run(CPU_GENERIC, "--no-wait", "--min-free-gb", "0", env=env, timeout=30)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "waiting" not in proc.stdout
    finally:
        os.kill(orphan, signal.SIGKILL)


def test_sigterm_while_waiting_stops_the_waiting_run(fs, tmp_path):
    ready = tmp_path / "ready"
    env = fs.env(FAKE_DOCKER_PLAN=json.dumps({CPU_MKL: "sleep", "*": "succeed"}),
                 FAKE_DOCKER_READY=str(ready))
    first = start(fs, CPU_MKL, "--min-free-gb", "0", env=env)
    try:
        wait_until(ready.exists, first)
        second = start(fs, CPU_GENERIC, "--min-free-gb", "0", env=env)
        line = second.stdout.readline()   # its first output: it waits now
        assert f"waiting for build_artifacts/ lock held by pid {first.pid}" in line
        second.send_signal(signal.SIGTERM)
        out, err = second.communicate(timeout=30)
        assert second.returncode == 130, line + out + err
        assert "interrupted" in err
        assert [run["config"] for run in fs.runs()] == [CPU_MKL]
        assert holder(fs).get("pid") == first.pid   # the waiting run did not touch the note
    finally:
        os.killpg(first.pid, signal.SIGINT)
        first.communicate(timeout=60)


def test_help_lists_no_wait(fs):
    proc = fs.run("--help")
    assert proc.returncode == 0
    assert "--no-wait" in proc.stdout and "4 --no-wait and another run holds" in proc.stdout


def test_lock_file_is_in_build_artifacts(fs):
    proc = fs.run(CPU_MKL, "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    assert (fs.artifacts / ".build-locally.lock").is_file()
    assert (fs.artifacts / ".build-locally.lock").read_text() == ""   # no holder now
