"""One build-locally run at a time per build_artifacts/ folder.

A run writes done-markers, logs (and their .previous copies), the derived configs of dev
builds, the package cache, conda-build's work folders (CONDA_BLD_PATH is build_artifacts/) and
the channel index. Two runs on the same build_artifacts/ (a second terminal, or two machines on
a shared filesystem) would overwrite each other's logs, delete each other's markers and run
two indexers over one channel, where the last to finish can drop the other's packages from
repodata.json.

Design: the lock is held for the **whole run** (from before the preflight until exit), not per
config. Indexing happens inside localbuild/in_container/build_steps.sh, at the end of every config, so a lock
held by this process around the whole batch covers it without the script taking part. A
per-config lock plus a separate index lock would let two runs build different configs at once,
but conda-build shares more than the markers and the index between configs in one croot
(package cache, source and git caches, the Miniforge bootstrap), so sharing the folder would
need a lock around each of those too: two runs that should build in parallel can use two
feedstock checkouts instead.

Mechanism: ``fcntl.flock`` on ``build_artifacts/.build-locally.lock``. The kernel drops the
lock when the process ends, however it ends (kill -9 included), so a lock is never stale;
the file is never deleted (deleting a lock file lets two runs lock two different files). The
file's content is a JSON note of who holds it (pid, host, user, command, start time), written
after locking and emptied on release, only to tell a waiting run whom it waits for. Linux NFS
clients implement flock with the server's byte-range locks, so the lock also works between
machines sharing build_artifacts/ over NFS (v4, or v3 with lockd). The file descriptor is not
inherited by the build processes (Python's default), so a compiler server left running by a
build cannot keep the folder locked; it is inherited by the build's guard only
(localbuild/build_guard.py), which outlives build-locally just until the build has stopped, so
the lock lives exactly as long as the run or its build. While a build runs, the note also names
it (config, the guard's pid, its container), so a waiting run can say which build it waits for.
"""
from __future__ import annotations

import contextlib
import datetime
import getpass
import json
import os
import socket
import time
from pathlib import Path
from typing import Callable, Iterator

from .errors import EXIT_BUSY, EXIT_PREFLIGHT, LocalBuildError

LOCK_NAME = ".build-locally.lock"
POLL_SECONDS = 1.0
NOTE_RETRIES = 10          # polls of 0.1 s for the note of a holder that has just locked


def holder_note(command: str) -> dict[str, object]:
    """What a waiting run is told about this one."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        user = str(os.getuid())
    return {"pid": os.getpid(), "host": socket.gethostname(), "user": user, "command": command,
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def describe(note: dict[str, object] | None) -> str:
    """``pid 123 on host X (build-locally.py --all, since 12:01)`` from a holder's note, and
    the build it runs: ``, building CONFIG as pid 456 in container NAME``."""
    if not note:
        # locked, but the holder has not written its note yet (or it is from an older version)
        return "another build-locally run (it has not said who it is yet)"
    since = str(note.get("started", "?"))
    with contextlib.suppress(ValueError):
        started = datetime.datetime.fromisoformat(since).astimezone()  # this machine's clock time
        today = datetime.datetime.now(started.tzinfo).date()
        since = started.strftime("%H:%M" if started.date() == today else "%Y-%m-%d %H:%M")
    pid = note.get("pid", "?")
    gone = ", a run that is gone" if note.get("host") == socket.gethostname() and not _alive(pid) else ""
    text = (f"pid {pid} on host {note.get('host', '?')} "
            f"({note.get('command', 'build-locally.py')}, since {since}{gone})")
    build = note.get("build")
    if isinstance(build, dict):
        text += f", building {build.get('config', '?')} as pid {build.get('pid', '?')}"
        if build.get("container"):
            text += f" in container {build['container']}"
        if gone:
            text += " (being stopped)"
    return text


def _alive(pid: object) -> bool:
    try:
        os.kill(int(pid), 0)  # type: ignore[arg-type]
    except (TypeError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def read_note(fd: int) -> dict[str, object] | None:
    try:
        data = json.loads(os.pread(fd, 65536, 0).decode("utf-8", "replace") or "null")
    except (OSError, ValueError):  # half-written by a holder that is just starting
        return None
    return data if isinstance(data, dict) else None


def _try_lock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _open_lock_file(artifacts: Path) -> int:
    path = artifacts / LOCK_NAME
    try:
        import fcntl  # noqa: F401  (flock: Linux and macOS)
    except ImportError:
        raise LocalBuildError("build-locally needs a Linux or macOS host (it locks "
                              "build_artifacts/ with fcntl.flock); run it there or in WSL",
                              EXIT_PREFLIGHT) from None
    if artifacts.exists() and not artifacts.is_dir():
        raise LocalBuildError(f"{artifacts} is not a folder; move it away (build-locally keeps "
                              "packages, done-markers and logs in that folder)", EXIT_PREFLIGHT)
    try:
        artifacts.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise LocalBuildError(f"cannot create the lock {path}: {exc.strerror or exc}; "
                              f"{artifacts.name}/ must be a folder this user can write (left by a "
                              "build as another user? sudo chown -R $USER build_artifacts)",
                              EXIT_PREFLIGHT) from None


@contextlib.contextmanager
def artifacts_lock(artifacts: Path, command: str, wait: bool,
                   say: Callable[[str], None]) -> Iterator[None]:
    """Hold the build_artifacts/ lock for the ``with`` block.

    Busy: with ``wait``, say once whom we wait for (again if another run takes it first) and
    poll until it is free; without, raise LocalBuildError (exit EXIT_BUSY) naming the holder.
    """
    fd = _open_lock_file(artifacts)
    try:
        told = None
        unnamed = 0
        while not _try_lock(fd):
            note = read_note(fd)
            if note is None and unnamed < NOTE_RETRIES:
                unnamed += 1  # the holder locked a moment ago and is writing its note
                time.sleep(0.1)
                continue
            holder = describe(note)
            if not wait:
                raise LocalBuildError(f"{artifacts.name}/ is locked by {holder}; wait for it to "
                                      "finish, or run without --no-wait to queue behind it",
                                      EXIT_BUSY)
            run = {key: (note or {}).get(key) for key in ("pid", "host", "started")}
            if run != told:  # once per holder run, not per config it builds
                say(f"waiting for {artifacts.name}/ lock held by {holder}")
                told = run
            time.sleep(POLL_SECONDS)
        _HELD[fd] = holder_note(command)
        _write_note(fd, _HELD[fd])
        try:
            yield
        finally:
            del _HELD[fd]
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no stale note; the lock itself goes with the fd
    finally:
        os.close(fd)


# the lock(s) this process holds, with their notes: the runner passes the descriptor to the
# build's guard and names the running build in the note (one per process, in practice)
_HELD: dict[int, dict[str, object]] = {}


def _write_note(fd: int, note: dict[str, object]) -> None:
    data = json.dumps(note).encode() + b"\n"
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))  # a longer note of an earlier holder must not trail it


def held_lock_fds() -> tuple[int, ...]:
    """The descriptors of the locks this process holds (none in a Slurm array task)."""
    return tuple(_HELD)


def note_build(config: str | None, pid: int | None = None, container: str | None = None) -> None:
    """Name the build now running under this process's lock (None: no build runs now)."""
    for fd, note in _HELD.items():
        note.pop("build", None)
        if config is not None:
            note["build"] = {"config": config, "pid": pid, "container": container}
        with contextlib.suppress(OSError):
            _write_note(fd, note)
