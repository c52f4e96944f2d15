"""Two build-locally.py runs on one build_artifacts/: the lock makes the second wait (or, with
--no-wait, refuse), so markers, logs and the channel index are never written by both at once.

Real processes: build-locally.py -> fake `docker run` -> localbuild/in_container/build_steps.sh -> fake conda,
whose `conda index` lists the channel, works a while, then writes repodata.json (and records
whether another indexer was running meanwhile).
"""
from __future__ import annotations

import contextlib
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
from tests.support.processes import wait_until_none_names

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
        rf"--min-free-gb 0, {SINCE}\)(, building ({CPU_MKL}|{CPU_GENERIC}) as pid \d+ in "
        rf"container build-locally-\S+)?", waiting[0]), waiting[0]
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
            rf"--min-free-gb 0, {SINCE}\), building {CPU_MKL} as pid \d+ in container "
            rf"build-locally-{CPU_MKL.lower()}-\S+; wait for it to finish, or run without "
            r"--no-wait to queue behind it\n", refused.stderr), refused.stderr
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


def test_killed_holder_s_build_stops_and_holds_the_lock_until_it_has(fs, tmp_path):
    """kill -9 of build-locally.py: its build's guard stops the build (the container removed,
    the engine client signalled) and holds the lock until the build has ended. A --no-wait run
    meanwhile exits 4 naming the build; once it has ended the folder is free, and never do two
    builds run in it."""
    ready, release = tmp_path / "ready", tmp_path / "release"
    env = fs.env(FAKE_DOCKER_PLAN=json.dumps({CPU_MKL: "sleep", "*": "succeed"}),
                 FAKE_DOCKER_READY=str(ready), FAKE_DOCKER_STOP_WHEN=str(release))
    first = start(fs, CPU_MKL, "--min-free-gb", "0", env=env)
    wait_until(ready.exists, first)
    client = int(ready.read_text())
    build = holder(fs)["build"]
    assert build["config"] == CPU_MKL and build["container"].startswith("build-locally-")
    try:
        first.kill()
        first.communicate(timeout=30)
        # the client takes its time to stop (until `release` exists): the folder stays locked
        refused = fs.run(CPU_GENERIC, "--no-wait", "--min-free-gb", "0", env=env, timeout=30)
        assert refused.returncode == 4, refused.stdout + refused.stderr
        assert (f"locked by pid {first.pid} on host {socket.gethostname()} (build-locally.py "
                f"{CPU_MKL} --min-free-gb 0, ") in refused.stderr
        assert (f", a run that is gone), building {CPU_MKL} as pid {build['pid']} in container "
                f"{build['container']} (being stopped); wait for it") in refused.stderr, refused.stderr
        assert len(refused.stderr.splitlines()) == 1 and refused.stdout == ""
        assert ["rm", "-f", build["container"]] in [call["argv"] for call in fs.calls()]
        os.kill(client, 0)   # still stopping
        release.write_text("")
        took = wait_until_none_names(str(fs.root), seconds=10)
        print(f"the killed run's build ended {took:.2f} s after its client was let go")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(client, signal.SIGKILL)
    log = (fs.artifacts / f"{CPU_MKL}-log.txt").read_text()
    assert log.endswith(f"the run that started this build (pid {first.pid}) is gone, so the build "
                        "was stopped; no done-marker written\n"), log[-500:]
    assert not fs.marker(CPU_MKL).exists()
    proc = fs.run(CPU_GENERIC, "--no-wait", "--min-free-gb", "0", env=env, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [run["config"] for run in fs.runs()] == [CPU_MKL, CPU_GENERIC]


def test_a_container_left_running_by_a_killed_run_holds_the_folder(fs, tmp_path):
    """A container that a killed run left running (its guard killed too: the engine lists it
    by the label naming this build_artifacts/): --no-wait refuses in one line naming it, its
    `docker rm -f` and --no-wait; without --no-wait the run waits until it has ended."""
    left = "build-locally-linux_64_left-20261128-000000-1"
    listed = tmp_path / "running"
    listed.write_text(left + "\n")
    env = fs.env(FAKE_DOCKER_PS=str(listed))
    refused = fs.run(CPU_GENERIC, "--no-wait", "--min-free-gb", "0", env=env)
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert refused.stderr == (
        f"error: build_artifacts/ is still being built into by container {left}, left running "
        "by a build-locally run that was killed; wait for it to end (run without --no-wait to "
        f"queue behind it) or stop it: docker rm -f {left}\n")
    ps = [call["argv"] for call in fs.calls() if call["argv"][0] == "ps"]
    assert ps == [["ps", "--filter", f"label=org.pytorch-feedstock.build-locally.artifacts={fs.artifacts}",
                   "--filter", "status=running", "--format", "{{.Names}}"]]
    assert fs.runs() == []

    waiting = start(fs, CPU_GENERIC, "--min-free-gb", "0", env=env)
    line = waiting.stdout.readline()
    assert line.startswith(f"build-locally: waiting for container {left}, left running in "
                           "build_artifacts/ by a build-locally run that was killed, to end "
                           f"(stop it: docker rm -f {left}; --no-wait exits instead)"), line
    assert fs.runs() == []
    listed.unlink()   # the container ended
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, out + err
    (run,) = fs.runs()
    assert ["--label", f"org.pytorch-feedstock.build-locally.artifacts={fs.artifacts}"] in [
        run["argv"][i:i + 2] for i in range(len(run["argv"]))]


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
