"""A build never outlives its run (issue 48, parts 1 and 2), with real processes and signals:
build-locally.py -> its build's guard -> the native build script (bash build_steps.sh -> the
fake conda-build, or --develop's fake py-rattler Python and its "compiler"), or the fake
engine client.

- kill -9 of build-locally: its guard stops the build; 10 s later no process of it runs.
- SIGHUP (a closed terminal, or `kill -HUP`): what Ctrl-C gets, one line, exit 129.
- Under `nohup` (SIGHUP ignored) a hangup stops nothing.
The real container engine's side: tests/localbuild/test_podman_build.py; the lock's:
tests/localbuild/test_lock.py.
"""
from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from localbuild.configs import host_platform
from tests.support.build_locally import install_fake_conda, make_feedstock, read_jsonl, summary_rows
from tests.support.processes import wait_until_none_names
from tests.support.develop_checkout import stand_in_checkout

CPU_MKL = "linux_64_blas_implmklcuda_compiler_versionNone"
DEADLINE = 10.0     # the "10 s later no build of it runs"

pytestmark = pytest.mark.skipif(host_platform() != "linux-64",
                                reason=f"the test configs are linux-64; this host is {host_platform()}")


@pytest.fixture
def fs(tmp_path):
    fs = make_feedstock(tmp_path, configs={CPU_MKL: {}})
    install_fake_conda(fs.bin_dir)
    return fs


def start(fs, *args: str, env: dict[str, str], **popen) -> subprocess.Popen:
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-S", str(fs.root / "build-locally.py"), *args],
                            cwd=fs.root, env=env, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True, **popen)


def wait_for(condition, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the build did not start"
        time.sleep(0.05)


def native_building(fs, tmp_path) -> tuple[subprocess.Popen, dict[str, str]]:
    """build-locally --native, its fake conda-build at work (it sleeps for minutes)."""
    calls = tmp_path / "conda-calls.jsonl"
    env = fs.env(FAKE_CONDA_LOG=str(calls), FAKE_CONDA_BUILD_SECONDS="300")
    proc = start(fs, CPU_MKL, "--native", "--min-free-gb", "0", env=env)
    wait_for(lambda: any(call["argv"][0] == "build" for call in read_jsonl(calls)), proc)
    return proc, env


def test_kill_9_of_a_native_run_stops_its_build_and_frees_the_folder(fs, tmp_path):
    proc, env = native_building(fs, tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    took = wait_until_none_names(str(fs.root), DEADLINE)
    print(f"native build gone {took:.2f} s after kill -9 of build-locally")
    log = (fs.artifacts / f"{CPU_MKL}-log.txt").read_text()
    assert f"the run that started this build (pid {proc.pid}) is gone, so the build was stopped" in log
    assert not fs.marker(CPU_MKL).exists()
    again = fs.run(CPU_MKL, "--native", "--no-wait", "--min-free-gb", "0",
                   env=dict(env, FAKE_CONDA_BUILD_SECONDS="0"))
    assert again.returncode == 0, again.stdout + again.stderr


def test_sighup_of_a_native_run_is_an_interrupt(fs, tmp_path):
    proc, _ = native_building(fs, tmp_path)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, out + err
    # as after Ctrl-C: the config's line and the summary (stdout), nothing on stderr
    assert err == "" and summary_rows(out)[CPU_MKL][0] == "interrupted (SIGHUP)", out + err
    assert f"[1/1 {CPU_MKL}] interrupted (SIGHUP) after " in out and "no done-marker written" in out
    wait_until_none_names(str(fs.root), DEADLINE)
    assert not fs.marker(CPU_MKL).exists()


def test_under_nohup_a_hangup_stops_nothing(fs, tmp_path):
    """SIGHUP ignored (nohup), the run keeps it so: the hangup goes by, a later Ctrl-C is what
    stops it (Python runs pending handlers lowest signal first, so a SIGHUP that counted would
    have named itself)."""
    calls = tmp_path / "conda-calls.jsonl"
    env = fs.env(FAKE_CONDA_LOG=str(calls), FAKE_CONDA_BUILD_SECONDS="300")
    proc = start(fs, CPU_MKL, "--native", "--min-free-gb", "0", env=env,
                 preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    wait_for(lambda: any(call["argv"][0] == "build" for call in read_jsonl(calls)), proc)
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert summary_rows(out)[CPU_MKL][0] == "interrupted (Ctrl-C)", out


def test_a_closed_terminal_stops_the_build_and_the_run_exits_129(fs, tmp_path):
    """build-locally on a pseudo-terminal it controls; the terminal goes away (its master
    closed): the kernel's hangup stops the build, writes to the dead terminal (EIO) break
    nothing, the log says what happened."""
    calls = tmp_path / "conda-calls.jsonl"
    env = fs.env(FAKE_CONDA_LOG=str(calls), FAKE_CONDA_BUILD_SECONDS="300")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-S", str(fs.root / "build-locally.py"), CPU_MKL,
                             "--native", "--min-free-gb", "0"], cwd=fs.root, env=env,
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    os.close(slave)
    try:
        deadline = time.monotonic() + 60
        while not any(call["argv"][0] == "build" for call in read_jsonl(calls)):
            assert proc.poll() is None and time.monotonic() < deadline
            try:   # keep the terminal drained, as a terminal window does
                os.read(master, 65536) if _readable(master) else time.sleep(0.05)
            except OSError:
                break
    finally:
        os.close(master)
    assert proc.wait(timeout=60) == 129
    wait_until_none_names(str(fs.root), DEADLINE)
    log = (fs.artifacts / f"{CPU_MKL}-log.txt").read_text()
    assert "interrupted (SIGHUP)" in log and "no done-marker written" in log, log[-1000:]
    assert not fs.marker(CPU_MKL).exists()


def _readable(fd: int) -> bool:
    import select

    return bool(select.select([fd], [], [], 0.05)[0])


def develop_feedstock(fs, tmp_path) -> tuple[list[str], dict[str, str], Path]:
    """--develop --native with a stand-in for py-rattler's Python: it answers the preflight's
    import, and as develop.py it starts a "compiler" (sleep) and waits for it."""
    ready = tmp_path / "compiling"
    python = fs.bin_dir / "rattler-python"
    python.write_text(
        '#!/bin/sh\n[ "$1" = -c ] && exit 0   # the preflight: import rattler, rattler_build\n'
        f'exec "{sys.executable}" -S -c "import os, subprocess; child = subprocess.Popen([\'sleep\', \'300\']); '
        f'open(\'{ready}.tmp\', \'w\').write(str(child.pid)); os.replace(\'{ready}.tmp\', \'{ready}\'); child.wait()"\n')
    python.chmod(0o755)
    (fs.root / "recipe" / "recipe.yaml").write_text("context:\n  version: 2.14.1\n")
    checkout = stand_in_checkout(tmp_path / "pytorch")
    args = [CPU_MKL, "--develop", str(checkout), "--native", "--min-free-gb", "0"]
    return args, fs.env(RATTLER_BUILD_PYTHON=str(python)), ready


@pytest.mark.parametrize("how", ["kill -9", "SIGHUP"])
def test_a_develop_build_does_not_outlive_its_run(fs, tmp_path, how):
    args, env, compiling = develop_feedstock(fs, tmp_path)
    proc = start(fs, *args, env=env)
    wait_for(compiling.exists, proc)
    compiler = int(compiling.read_text())
    if how == "kill -9":
        proc.kill()
        proc.communicate(timeout=30)
    else:
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 129, out + err
        assert err.strip().splitlines()[-1] == "build-locally: interrupted (SIGHUP)", err
    took = wait_until_none_names(str(fs.root), DEADLINE)
    with pytest.raises(ProcessLookupError):
        os.kill(compiler, 0)
    print(f"--develop ({how}): build gone after {took:.2f} s")
    again = fs.run(*args, "--no-wait", env=dict(env, RATTLER_BUILD_PYTHON="/bin/true"))
    assert again.returncode != 4, again.stderr     # the folder is free


def test_the_guard_exits_with_its_builds_status_and_passes_no_lock_on(tmp_path):
    """The guard alone: the build's exit status and death by signal come through as they
    were; the descriptor it holds (the lock) does not reach the build."""
    from localbuild.build_guard import guarded

    lock = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    script = f"import os, sys; os.fstat({lock}) if len(sys.argv) > 1 else None; sys.exit(7)"
    status = subprocess.run(guarded([sys.executable, "-c", script], os.getpid(), signal.SIGINT, 1.0),
                            pass_fds=(lock,)).returncode
    assert status == 7
    leaked = subprocess.run(guarded([sys.executable, "-c", script, "x"], os.getpid(), signal.SIGINT, 1.0),
                            pass_fds=(lock,), capture_output=True, text=True)
    assert leaked.returncode == 1 and "Bad file descriptor" in leaked.stderr
    killed = subprocess.run(guarded(["sh", "-c", "kill -TERM $$"], os.getpid(), signal.SIGINT, 1.0))
    assert killed.returncode == -signal.SIGTERM
    os.close(lock)
