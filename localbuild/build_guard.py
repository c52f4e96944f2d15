"""The build's guard: the one process between build-locally.py and a build it starts, so that the
build never outlives its run and the build_artifacts/ lock never outlives the build.

build-locally starts `python -S build_guard.py SETTINGS COMMAND...` in a session of its own and
hands it the lock's file descriptor. The guard starts COMMAND (the native build script, or the
`docker run` / `podman run` / `apptainer exec` client) in a process group of its own, waits for
it, and exits with its status. It stops the build when asked (SIGTERM, SIGINT or SIGHUP from
build-locally) and also when build-locally is gone (kill -9, a crash): Linux tells it at once
(prctl PR_SET_PDEATHSIG), elsewhere it sees its parent change within a second. Stopping is:
remove the container (the engine's client dying leaves it running), then the build's whole
process group gets the location's first signal, SIGTERM, SIGKILL, each given GRACE seconds,
until no process of the group is left. Only then does the guard exit, and with it the last
holder of the lock: a second run waits (or, with --no-wait, names this build) until the
build has really ended. The build itself does not inherit the lock, so a compiler server it
leaves behind cannot keep build_artifacts/ locked. The build's TMPDIR is a folder of the
guard's own (build-locally-tmp-<pid>-...), removed when the build has ended, or by the next
build where the guard was killed too.

Standard library only, and no imports from localbuild/: it runs as a script (`-S`); common/
is found beside localbuild/.
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

if not __package__:   # run as a script: common/ is beside localbuild/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common.child_lifetime import die_with_parent  # noqa: E402
from common.owned_folders import make_owned, remove_stale  # noqa: E402

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
REMOVE_TIMEOUT = 120.0        # the engine's `rm -f` (as localbuild/engine.py gives it)
GROUP_GONE_POLL = 0.05
ORPHANED_GRACE = 3.0         # per signal, once build-locally is gone
BUILD_TMP_PREFIX = "build-locally-tmp-"   # + the guard's pid (common/owned_folders.py)


def guarded(command: list[str], parent: int, first_signal: int, grace: float,
            remove: list[str] | None = None, log: Path | None = None) -> list[str]:
    """The command line that runs `command` under the guard."""
    settings = {"parent": parent, "first": int(first_signal), "grace": grace,
                "remove": remove, "log": str(log) if log else None}
    return [sys.executable, "-S", str(Path(__file__).resolve()), json.dumps(settings), *command]


def stop_timeout(grace: float) -> float:
    """How long a guard asked to stop may take at most (removal, then three signals)."""
    return REMOVE_TIMEOUT + 3 * grace + 10.0


@contextlib.contextmanager
def build_temp_folder() -> Iterator[Path]:
    """The build's TMPDIR: a folder of this guard's own in the temp dir, removed once the build
    has ended, so that what its tools leave there (pip's build folders, a killed compiler's
    files) goes with it; one whose guard was killed too is removed by the next build."""
    parent = Path(tempfile.gettempdir())
    remove_stale(parent, BUILD_TMP_PREFIX)
    folder = make_owned(parent, BUILD_TMP_PREFIX)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member changed its user (sudo in the build): still there
    return True


class Guard:
    def __init__(self, settings: dict, command: list[str]) -> None:
        self.parent = int(settings["parent"])
        self.first = signal.Signals(int(settings["first"]))
        self.grace = float(settings["grace"])
        self.remove = settings.get("remove")
        self.log = settings.get("log")
        self.command = command
        self.asked: list[int] = []

    def run(self) -> int:
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)   # a signal wakes the select() below at once
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda number, frame: self.asked.append(number))
        signal.signal(signal.SIGCHLD, lambda number, frame: None)
        die_with_parent(signal.SIGTERM)   # Linux; elsewhere the getppid() look below
        with build_temp_folder() as tmp:
            try:
                child = subprocess.Popen(self.command, start_new_session=True,
                                         env=dict(os.environ, TMPDIR=str(tmp)))
            except OSError as exc:
                print(f"build-locally: cannot start {self.command[0]}: {exc.strerror or exc}",
                      file=sys.stderr, flush=True)
                return 127
            return self.wait(child, wake_read)

    def wait(self, child: subprocess.Popen, wake_read: int) -> int:
        stopped = False
        while child.poll() is None:
            # the parent check comes after prctl: a parent that died before it is seen here
            if not stopped and (self.asked or os.getppid() != self.parent):
                stopped = True
                self.stop(child)
                continue
            select.select([wake_read], [], [], 1.0)
            try:
                while os.read(wake_read, 512):
                    pass
            except BlockingIOError:
                pass
        return child.returncode

    def stop(self, child: subprocess.Popen) -> None:
        orphaned = os.getppid() != self.parent
        if self.remove:
            try:
                subprocess.run(self.remove, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=REMOVE_TIMEOUT)
            except (OSError, subprocess.TimeoutExpired):
                pass  # the signals below still stop the client
        # with nobody left to show a graceful stop to, the build goes sooner: none of it runs
        # 10 s after its run died (a process ignoring the first signal, as a non-interactive
        # shell's background job ignores SIGINT, would otherwise hold on for a whole grace)
        grace = min(self.grace, ORPHANED_GRACE) if orphaned else self.grace
        for signum in (self.first, signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(child.pid, signum)
            except ProcessLookupError:
                break
            except PermissionError:
                continue
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                child.poll()   # reap it: a zombie still counts as a member of its group
                if not _group_alive(child.pid):
                    break
                time.sleep(GROUP_GONE_POLL)
            else:
                continue
            break
        if orphaned:
            self.note(f"build-locally: the run that started this build (pid {self.parent}) is "
                      "gone, so the build was stopped; no done-marker written\n")

    def note(self, line: str) -> None:
        """The config's log says why it ends (nobody reads the build's output any more)."""
        if not self.log:
            return
        try:
            with open(self.log, "a", encoding="utf-8") as handle:
                handle.write(line)
        except OSError:
            pass


def _exit_like(status: int) -> int:
    """Our exit status says what the build's said, a signal included."""
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status


def main(argv: list[str]) -> int:
    settings = json.loads(argv[1])
    return _exit_like(Guard(settings, argv[2:]).run())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
