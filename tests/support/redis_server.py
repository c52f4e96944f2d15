"""A real Redis server (Debian's redis-server) on 127.0.0.1 and a free port, for the compile
cache tests and benchmark. Loopback only, no persistence, stopped afterwards, every wait bounded.
"""
from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class RedisUnavailable(Exception):
    """redis-server is missing or did not start; tests skip with this reason."""


def free_port() -> int:
    """A port nothing listens on right now (bound once on loopback, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def ping(port: int, timeout: float = 1.0) -> bool:
    """The server answers (PONG, or NOAUTH when it wants a password)."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


@contextlib.contextmanager
def redis_server(workdir: Path, password: str | None = None) -> Iterator[str]:
    """Start redis-server on 127.0.0.1:<free port>; yields its redis:// URL; stops it after.
    With `password`, clients must AUTH first (the URL does not carry it)."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RedisUnavailable("redis-server not found (Debian package redis-server)")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    logfile = workdir / "redis.log"
    proc = subprocess.Popen(
        [exe, "--bind", LOOPBACK, "--port", str(port), "--save", "", "--appendonly", "no",
         "--protected-mode", "yes", "--dir", str(workdir), "--logfile", str(logfile)]
        + (["--requirepass", password] if password else []),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ping(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = logfile.read_text()[-300:] if logfile.exists() else ""
                raise RedisUnavailable(f"redis-server did not answer on {LOOPBACK}:{port} "
                                       f"within {START_TIMEOUT_S:.0f} s: {tail.strip()}")
            time.sleep(0.05)
        yield f"redis://{LOOPBACK}:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)


def key_count(url: str) -> int:
    """DBSIZE of the server at url (what a cache stored), via the RESP protocol."""
    host, port = url.split("://", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=2.0) as conn:
        conn.sendall(b"DBSIZE\r\n")
        reply = conn.recv(64)
    if not reply.startswith(b":"):
        raise RuntimeError(f"unexpected DBSIZE reply {reply!r}")
    return int(reply[1:].split(b"\r\n", 1)[0])
