"""The private Docker engine of tests/support/docker_daemon.py, for real: it starts on its own
socket, runs a container from an imported rootfs with the default network, the host network
and a bind mount, and leaves nothing behind (no process, mount, folder or cgroup), also when
its daemons were killed or did not start in time."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.support import docker_daemon as engine
from tests.support.container_host import host_shell_rootfs
from tests.support.docker_daemon import (DockerDaemon, DockerDaemonError, docker_daemon, docker_unavailable,
                                         docker_daemon_or_skip)

pytestmark = [pytest.mark.container]

IMAGE = "feedstock-test/shell:1"


@pytest.fixture
def docker(tmp_path):
    with docker_daemon_or_skip(tmp_path / "docker") as running:
        yield running


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory) -> Path:
    return host_shell_rootfs(tmp_path_factory.mktemp("rootfs") / "shell.tar")


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _machine_state() -> dict[str, list[str]]:
    """What a Docker engine or client could leave on the machine outside the engine's folders:
    the system's settings, the user's client settings, shim sockets."""
    folders = (Path("/etc/docker"), Path.home() / ".docker", engine.SHIM_SOCKETS)
    return {str(folder): sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []
            for folder in folders}


def _left_behind(daemon: DockerDaemon, pids: set[int]) -> list[str]:
    """What of the engine outlived its context: processes, mounts, folders, cgroups."""
    left = [f"pid {pid}" for pid in sorted(pids) if _alive(pid)]
    left += [f"process {pid}" for pid in sorted(daemon.pids()) if _alive(pid)]
    left += [f"mount {point}" for point in engine._mounts_under([daemon.state, daemon.data_root])]
    left += [f"folder {path}" for path in (daemon.state, daemon.data_root) if path.exists()]
    left += [f"cgroup {path}" for path in engine._cgroup_dirs(daemon.cgroup_parent)]
    return left


def test_the_engine_is_private_and_stops_without_a_trace(tmp_path):
    before = _machine_state()
    started = time.monotonic()
    with docker_daemon_or_skip(tmp_path / "docker") as daemon:
        up = time.monotonic() - started
        info = daemon.info()
        pids = daemon.pids()
        assert daemon.env["DOCKER_HOST"] == f"unix://{daemon.socket}"
        assert len(str(daemon.socket)) < 100, "a unix socket path is limited to 107 bytes"
        assert info["Driver"] == "overlay2" and info["CgroupDriver"] == "cgroupfs"
        assert info["DockerRootDir"] == str(daemon.data_root)
        assert {proc.pid for proc in daemon.procs} <= pids and len(daemon.procs) == 2
        names = {Path(f"/proc/{pid}/exe").resolve().name for pid in pids}
        assert names == {"dockerd", "containerd"}
    print(f"private dockerd up in {up:.2f} s")
    assert _left_behind(daemon, pids) == []
    assert _machine_state() == before
    assert (tmp_path / "docker" / "dockerd.log").is_file(), "the log stays for a post-mortem"


def test_a_failing_test_still_stops_the_engine(tmp_path, rootfs):
    with pytest.raises(RuntimeError, match="the test failed"):
        with docker_daemon_or_skip(tmp_path / "docker") as daemon:
            daemon.run("import", str(rootfs), IMAGE)
            daemon.run("run", "-d", IMAGE, "/bin/sh", "-c", "while :; do :; done")
            pids = daemon.pids()
            raise RuntimeError("the test failed")
    assert _left_behind(daemon, pids) == []


def test_an_imported_rootfs_runs_with_the_default_and_the_host_network(docker, rootfs):
    docker.run("import", str(rootfs), IMAGE)
    started = time.monotonic()
    assert docker.run("run", "--rm", IMAGE, "/bin/sh", "-c", "echo hi").stdout == "hi\n"
    print(f"container start and exit: {time.monotonic() - started:.2f} s")
    assert docker.run("run", "--rm", "--network", "host", IMAGE,
                      "/bin/sh", "-c", "echo host").stdout == "host\n"
    assert docker.run("ps", "-aq").stdout == "", "--rm removed both containers"


def test_what_a_container_writes_to_a_bind_mount_is_on_the_host(docker, rootfs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    docker.run("import", str(rootfs), IMAGE)
    docker.run("run", "--rm", "-v", f"{out}:/out", IMAGE, "/bin/sh", "-c",
               "echo written > /out/file")
    assert (out / "file").read_text() == "written\n"
    assert (out / "file").stat().st_uid == 0, "a root daemon writes as root"


def test_killed_daemons_leave_nothing_behind(tmp_path, rootfs):
    """dockerd and containerd SIGKILLed while a container runs: the shim and the container
    outlive them, and the context still kills them and removes the mounts and folders."""
    before = _machine_state()
    with docker_daemon_or_skip(tmp_path / "docker") as daemon:
        daemon.run("import", str(rootfs), IMAGE)
        daemon.run("run", "-d", IMAGE, "/bin/sh", "-c", "while :; do :; done")
        for proc in daemon.procs:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        orphans = daemon.pids()
        assert orphans, "the container and its shim outlive the daemons"
    assert _left_behind(daemon, orphans) == []
    assert _machine_state() == before, "the killed shim's socket is removed too"


def test_a_daemon_that_does_not_answer_in_time_is_one_error_and_is_cleaned_up(
        tmp_path, monkeypatch):
    reason = docker_unavailable()
    if reason:
        pytest.skip(reason)
    monkeypatch.setattr(engine, "START_TIMEOUT_S", 0.0)
    seen: list[DockerDaemon] = []
    real_wait = engine._wait

    def wait(daemon, ready, name):
        seen.append(daemon)
        real_wait(daemon, ready, name)

    monkeypatch.setattr(engine, "_wait", wait)
    with pytest.raises(DockerDaemonError, match=r"containerd did not answer within 0 s: .*log"):
        with docker_daemon(tmp_path / "docker"):
            pass
    daemon = seen[0]
    assert _left_behind(daemon, {proc.pid for proc in daemon.procs}) == []
