"""A private Docker engine (Debian's docker.io: dockerd 20.10 and containerd 1.6) for the tests
that run real Docker: its own containerd and dockerd, every state folder its own, a socket of
its own that clients reach through DOCKER_HOST. No system daemon, /etc/docker, ~/.docker or
iptables rule is read or touched. Stopped afterwards (containers killed, SIGTERM, then SIGKILL
after a bounded wait, leftovers found by our folders and cgroup), its mounts and folders
removed, even when the test fails.

`docker_unavailable()` says why the machine cannot run it (the tests skip with that);
`docker_daemon(work)` starts it and yields a `DockerDaemon`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from common.mounts import is_at_or_below, mounts
from tests.support.container_host import overlay_mounts_in, rootful_tools_missing

TOOLS = ("dockerd", "containerd", "containerd-shim-runc-v2", "runc", "docker")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
# unix socket paths are limited to 107 bytes: sockets live under a short /tmp/dk-XXXXXXXX,
# never under the test's (long) tmp_path
SOCKET_PARENT = Path("/tmp")
# data-root candidates, in order, after the test's own folder: overlay2 needs a backing
# filesystem that takes an overlay mount, and dockerd refuses one that is itself overlay (as /
# and /tmp are inside many containers); /var/lib is often a volume there, /dev/shm is tmpfs
DATA_FALLBACKS = (Path("/var/lib"), Path("/dev/shm"))
# containerd 1.6 fixes where shims listen (not configurable); a shim that is killed leaves its
# socket there, which _stop removes
SHIM_SOCKETS = Path("/run/containerd/s")
# variables that would point a client at another engine, or at other settings
CLIENT_VARIABLES = ("DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION",
                    "DOCKER_DEFAULT_PLATFORM", "DOCKER_BUILDKIT")


class DockerUnavailable(Exception):
    """This machine cannot run a private Docker engine; tests skip with this reason."""


class DockerDaemonError(RuntimeError):
    """The engine is installed but did not start or stop; the log's tail says why."""


@dataclass
class DockerDaemon:
    env: dict[str, str]      # this process's environment, DOCKER_HOST and DOCKER_CONFIG ours
    socket: Path             # dockerd's API socket
    work: Path               # the test's folder: dockerd.log and containerd.log stay there
    state: Path              # the short folder with the sockets and exec-root (removed after)
    data_root: Path          # images and containers (removed after)
    cgroup_parent: str       # every container's cgroup lives below this one
    procs: list[subprocess.Popen] = field(default_factory=list)   # containerd, dockerd

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        """`docker ARGS` against this engine only; with check, a failure raises with stderr."""
        proc = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} exited {proc.returncode}: "
                                 f"{proc.stderr.strip()[-800:]}")
        return proc

    def pids(self) -> set[int]:
        """Every process of this engine still alive: its daemons, shims and containers."""
        alive = {proc.pid for proc in self.procs if proc.poll() is None}
        return alive | _pids_naming(self.state) | _pids_in_cgroup(self.cgroup_parent)

    def info(self) -> dict:
        """`docker info` as a dict (Driver, CgroupDriver, DockerRootDir, ServerVersion, ...)."""
        return json.loads(self.run("info", "--format", "{{json .}}").stdout)

    def log_tail(self, lines: int = 8) -> str:
        return _log_tail(self.work, lines)

    def containers(self, label: str) -> list[str]:
        """The names of every container (running or not) with this label (KEY or KEY=VALUE)."""
        out = self.run("ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}").stdout
        return sorted(out.split())

    def start_dockerd(self) -> None:
        """dockerd on our containerd and folders; again after kill_dockerd, with the same state."""
        self.procs.append(_start([
            "dockerd", "--config-file", str(self.work / "daemon.json"), "--data-root",
            str(self.data_root), "--exec-root", str(self.state / "exec"), "--host",
            f"unix://{self.socket}", "--pidfile", str(self.state / "docker.pid"),
            "--containerd", str(self.state / "containerd.sock"),
            "--iptables=false", "--ip6tables=false", "--bridge=none",
            "--storage-driver=overlay2", "--exec-opt", "native.cgroupdriver=cgroupfs",
            "--cgroup-parent", f"/{self.cgroup_parent}", "--shutdown-timeout", "2"],
            self.work / "dockerd.log"))
        _wait(self, lambda: _answers(self), "dockerd")

    def kill_dockerd(self) -> None:
        """SIGKILL to dockerd alone, as when it crashes: containerd and the containers' shims
        live on, clients get no answer."""
        dockerd = self.procs.pop()
        dockerd.kill()
        dockerd.wait(timeout=STOP_TIMEOUT_S)
        with contextlib.suppress(OSError):
            (self.state / "docker.pid").unlink()


def docker_unavailable() -> str | None:
    """Why this machine cannot run the private engine, or None."""
    return rootful_tools_missing(TOOLS, "apt-get install docker.io", "a private dockerd needs root (CI runs as root)")


def _data_root(work: Path) -> Path:
    """work/data, or a new folder in the first fallback that takes an overlay mount."""
    if overlay_mounts_in(work):
        return work / "data"
    for parent in DATA_FALLBACKS:
        if parent.is_dir() and overlay_mounts_in(parent):
            return Path(tempfile.mkdtemp(prefix="feedstock-dockerd-", dir=parent))
    raise DockerUnavailable(f"no folder takes an overlay mount for overlay2 (tried {work}, "
                            f"{', '.join(map(str, DATA_FALLBACKS))})")


def _daemon_settings(work: Path) -> dict[str, str]:
    # dockerd before 23 writes a trust key to /etc/docker/key.json unless told another path;
    # later ones write none and may refuse the setting
    version = subprocess.run(["dockerd", "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    match = re.search(r"version (\d+)\.", version)
    if match and int(match.group(1)) < 23:
        return {"deprecated-key-path": str(work / "key.json")}
    return {}


def _containerd_config(data: Path, state: Path) -> str:
    # our own containerd: dockerd would otherwise use a system containerd if one listens on
    # /run/containerd/containerd.sock, sharing its containers with the system's Docker
    return "\n".join([
        "version = 2",
        f'root = "{data / "containerd"}"',
        f'state = "{state / "containerd"}"',
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        "[grpc]", f'  address = "{state / "containerd.sock"}"',
        '[plugins."io.containerd.internal.v1.opt"]', f'  path = "{data / "opt"}"',
        ""])


@contextlib.contextmanager
def docker_daemon(work: Path) -> Iterator[DockerDaemon]:
    """Start containerd and dockerd with every folder private; yield the engine; stop it after."""
    reason = docker_unavailable()
    if reason:
        raise DockerUnavailable(reason)
    work.mkdir(parents=True, exist_ok=True)
    data = _data_root(work)
    state = Path(tempfile.mkdtemp(prefix="dk-", dir=SOCKET_PARENT))
    client = work / "client-config"     # DOCKER_CONFIG: the client never reads ~/.docker
    client.mkdir(exist_ok=True)
    # a settings file of our own: /etc/docker/daemon.json is not read
    (work / "daemon.json").write_text(json.dumps(_daemon_settings(work)) + "\n")
    (work / "containerd.toml").write_text(_containerd_config(data, state))
    socket = state / "docker.sock"
    env = {name: value for name, value in os.environ.items() if name not in CLIENT_VARIABLES}
    env.update(DOCKER_HOST=f"unix://{socket}", DOCKER_CONFIG=str(client))
    daemon = DockerDaemon(env=env, socket=socket, work=work, state=state, data_root=data,
                          cgroup_parent=state.name)
    try:
        daemon.procs.append(_start(["containerd", "--config", str(work / "containerd.toml")],
                                   work / "containerd.log"))
        _wait(daemon, lambda: (state / "containerd.sock").is_socket(), "containerd")
        daemon.start_dockerd()
        yield daemon
    finally:
        try:
            _stop(daemon)
        finally:
            _remove(daemon)


def _start(command: list[str], log: Path) -> subprocess.Popen:
    # a session of its own: Ctrl-C in the terminal reaches the test, not the engine
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)


def _answers(daemon: DockerDaemon) -> bool:
    if not daemon.socket.is_socket():
        return False
    try:
        return daemon.run("version", "--format", "{{.Server.Version}}", timeout=10,
                          check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _wait(daemon: DockerDaemon, ready: Callable[[], bool], name: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        for proc in daemon.procs:
            if proc.poll() is not None:
                raise DockerDaemonError(f"{proc.args[0]} exited ({proc.returncode}) while "
                                        f"starting: {daemon.log_tail()}")
        if time.monotonic() > deadline:
            raise DockerDaemonError(f"{name} did not answer within {START_TIMEOUT_S:.0f} s: "
                                    f"{daemon.log_tail()}")
        time.sleep(0.1)


def _log_tail(work: Path, lines: int) -> str:
    tails = []
    for name in ("containerd.log", "dockerd.log"):
        path = work / name
        if path.exists():
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            tails.append(f"{name}: " + " | ".join(tail))
    return "; ".join(tails) or "no daemon log"


def _stop(daemon: DockerDaemon) -> None:
    """Containers killed first (dockerd's own shutdown waits for them), then dockerd, then
    containerd: SIGTERM, a bounded wait, SIGKILL. What survives a SIGKILL (shims, container
    processes) is found by our state folder and cgroup and killed by pid."""
    if daemon.procs and daemon.procs[-1].poll() is None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired, AssertionError):
            running = daemon.run("ps", "-q", timeout=30).stdout.split()
            if running:
                daemon.run("kill", *running, timeout=60, check=False)
    for proc in reversed(daemon.procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)
    shims = _pids_naming(daemon.state)
    sockets = [_shim_socket(pid) for pid in shims]
    for pid in _pids_in_cgroup(daemon.cgroup_parent) | shims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while daemon.pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    for socket in filter(None, sockets):   # a shim removes it only when it exits by itself
        with contextlib.suppress(OSError):
            socket.unlink()
    left = daemon.pids()
    if left:
        raise DockerDaemonError(f"processes of the private engine survived SIGKILL: {sorted(left)}")


def _shim_socket(pid: int) -> Path | None:
    """Where a containerd 1.6 shim listens: SHIM_SOCKETS/sha256(address/namespace/id)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        options = dict(zip(args[1::2], args[2::2]))
        key = f"{options['-address']}/{options['-namespace']}/{options['-id']}"
    except (OSError, UnicodeDecodeError, KeyError):
        return None
    return SHIM_SOCKETS / hashlib.sha256(key.encode()).hexdigest()


def _remove(daemon: DockerDaemon) -> None:
    """Unmount what the engine left mounted under its folders (a killed dockerd leaves its
    overlay and netns mounts), then remove the folders and the engine's cgroups."""
    folders = [daemon.state, daemon.data_root]
    for mountpoint in sorted(_mounts_under(folders), key=len, reverse=True):
        subprocess.run(["umount", "-l", mountpoint], capture_output=True, timeout=30)
    shutil.rmtree(daemon.state, ignore_errors=True)
    shutil.rmtree(daemon.data_root, ignore_errors=True)
    for top in _cgroup_dirs(daemon.cgroup_parent):
        for folder in sorted(top.rglob("*"), key=lambda path: len(path.parts), reverse=True):
            if folder.is_dir():
                with contextlib.suppress(OSError):
                    folder.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def _mounts_under(folders: list[Path]) -> list[str]:
    return [entry.point for entry in mounts()
            if any(is_at_or_below(entry.point, str(folder)) for folder in folders)]


def _pids_naming(folder: Path) -> set[int]:
    """Processes whose command line names a path in folder (our engine's shims)."""
    needle = f"{folder}/".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


def _cgroup_dirs(parent: str) -> list[Path]:
    """The engine's cgroup folder in every hierarchy (cgroup v1 controllers, or v2)."""
    root = Path("/sys/fs/cgroup")
    candidates = [root / parent] + [path / parent for path in root.iterdir() if path.is_dir()]
    return [path for path in candidates if path.is_dir()]


def _pids_in_cgroup(parent: str) -> set[int]:
    found = set()
    for top in _cgroup_dirs(parent):
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                found.update(int(pid) for pid in procs.read_text().split())
    return found


@contextlib.contextmanager
def docker_daemon_or_skip(work: Path) -> Iterator[DockerDaemon]:
    """docker_daemon(work) for a test, or skip it with the reason this machine cannot run one."""
    import pytest

    reason = docker_unavailable()
    if reason:
        pytest.skip(reason)
    try:
        with docker_daemon(work) as running:
            yield running
    except DockerUnavailable as err:
        pytest.skip(str(err))
