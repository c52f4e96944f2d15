"""Runs one plan: prepares files, starts the build, tees its output, cleans up the container."""
from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import engine as engines
from common.atomic_files import write_atomically
from common.interrupts import INTERRUPTS, interrupt_name
from .build_guard import guarded, stop_timeout
from .console import Console, format_duration
from .log_scan import last_reason, log_mentions
from .location import location_of
from .lock import held_lock_fds, note_build
from .build_plan import BuildPlan
from .options import Options
from .plan import process_environment
from .source_tarball import download_failure_detail, link_tarball, recipe_file, write_recipe_copy

STEP_PREFIX = b"::build-locally-step::"
# a Slurm task's build names the packages it moved into build_artifacts/ (siblings move theirs
# at the same time, so the folder's before/after difference is not this build's alone)
PACKAGE_PREFIX = b"::build-locally-package::"
HEARTBEAT_SECONDS = 300.0
STOP_GRACE_SECONDS = 10.0
# after a failed container build: does the engine still answer? (a dead daemon also fails
# every later config; the batch stops instead)
ENGINE_PROBE_SECONDS = 15.0
# a failed build ran out of disk when its log says so (ENOSPC as C, Python and Rust print it)
# or when build_artifacts/ is left with less than this
DISK_FULL_MARKERS = (b"No space left on device", b"os error 28")
NEARLY_FULL_BYTES = 64 * 2**20
LOG_TAIL_BYTES = 256 * 1024
_SUBDIR = re.compile(r"^(noarch|linux-[a-z0-9_]+|osx-[a-z0-9_]+|win-[a-z0-9_]+)$")


@dataclass
class Outcome:
    status: str                 # "ok" | "failed" | "interrupted"
    detail: str = ""
    seconds: float = 0.0
    packages: list[Path] = field(default_factory=list)
    engine_lost: str = ""       # why the container engine stopped answering during the build


class BuildInterrupted(Exception):
    """Ctrl-C / SIGTERM / SIGHUP while a build ran; carries the outcome of the interrupted
    config and the interrupt itself (to raise again where no summary follows)."""

    def __init__(self, outcome: Outcome, interrupt: KeyboardInterrupt | None = None) -> None:
        super().__init__("interrupted")
        self.outcome = outcome
        self.interrupt = interrupt if interrupt is not None else KeyboardInterrupt()


def package_snapshot(artifacts: Path) -> dict[Path, int]:
    """Every package in the channel's subdirs with its mtime (to see what a build produced)."""
    found: dict[Path, int] = {}
    try:
        subdirs = [entry for entry in os.scandir(artifacts)
                   if entry.is_dir() and _SUBDIR.match(entry.name)]
    except FileNotFoundError:
        return found
    for subdir in subdirs:
        for entry in os.scandir(subdir.path):
            if entry.name.endswith((".conda", ".tar.bz2")) and entry.is_file():
                found[Path(entry.path)] = entry.stat().st_mtime_ns
    return found


def prepare(plan: BuildPlan, options: Options) -> None:
    """Files the build needs; the marker goes first so a stale one never claims success."""
    options.artifacts.mkdir(parents=True, exist_ok=True)
    if plan.marker.exists() and not (plan.interactive or plan.test_only):  # not builds
        plan.marker.unlink()
    if plan.derived_config is not None and plan.derived_text is not None:
        write_atomically(plan.derived_config, plan.derived_text)
    if plan.source_link is not None and options.request.source_tarball is not None:
        link_tarball(plan.source_link, options.request.source_tarball)
    if plan.derived_recipe is not None and plan.derived_recipe_text is not None:
        write_recipe_copy(options.feedstock_root / "recipe", plan.derived_recipe,
                          plan.derived_recipe_text, "recipe.yaml")
    if options.request.compile_cache_dir is not None:
        options.request.compile_cache_dir.mkdir(parents=True, exist_ok=True)


def open_log(plan: BuildPlan):
    """The config's log, keeping the previous run's log as <name>.previous.txt."""
    if plan.log.exists():
        os.replace(plan.log, plan.log.with_name(plan.log.name[:-4] + ".previous.txt"))
    return open(plan.log, "wb")


def run_plan(plan: BuildPlan, options: Options, console: Console, label: str,
             environ: dict[str, str]) -> Outcome:
    """Build one config. Raises BuildInterrupted on Ctrl-C (after stopping the build)."""
    try:
        prepare(plan, options)
        log_file = open_log(plan)
    except OSError as exc:
        detail = f"cannot write {exc.filename or options.artifacts}: {exc.strerror or exc}"
        console.say(f"[{label}] failed: {detail} (files left by an earlier build as another "
                    "user? fix the owner, e.g. sudo chown -R $USER build_artifacts)")
        return Outcome("failed", detail)
    before = package_snapshot(options.artifacts)
    started = time.monotonic()
    env = process_environment(plan, environ)
    reported: list[str] = []
    with log_file as log:
        console.log = log
        try:
            console.say(f"[{label}] start: {location_of(plan).describe(options)} build, "
                        + (f"image {plan.image}" if plan.image else f"in {options.feedstock_root}"))
            console.say(f"[{label}] log: {plan.log}")
            log.write(f"command: {shlex.join(plan.command)}\n".encode(errors="surrogateescape"))
            if plan.interactive:
                returncode = _run_interactive(plan, env, console, label, options.request.engine)
            else:
                returncode = _run_streaming(plan, env, console, label, started, options, reported)
        except KeyboardInterrupt as exc:
            seconds = time.monotonic() - started
            console.say(f"[{label}] interrupted ({interrupt_name(exc)}) after "
                        f"{format_duration(seconds)}; no done-marker written")
            raise BuildInterrupted(Outcome("interrupted", interrupt_name(exc), seconds), exc) from None
        finally:
            console.log = None
        seconds = time.monotonic() - started
        produced = sorted(path for path, mtime in package_snapshot(options.artifacts).items()
                          if before.get(path) != mtime)
        if plan.env.get("TASK_OUTPUT_DIR"):
            produced = sorted(options.artifacts / name for name in reported)
        outcome = _judge(plan, returncode, seconds, produced)
        if outcome.status == "failed" and plan.container is not None:
            outcome = _engine_still_there(outcome, options.request.engine)
        if outcome.status == "failed" and not outcome.engine_lost:
            log.flush()  # the scans read the file
            source = (_source_download_detail(plan, options)
                      if returncode != 0 and options.request.source_tarball is None else None)
            outcome.detail = _out_of_space(plan.log, options.artifacts) or source or _with_reason(outcome.detail, plan.log)
        console.log = log
        _finish_container(plan, options, outcome, console, label)
        console.say(f"[{label}] {outcome.status}{' (' + outcome.detail + ')' if outcome.detail else ''}"
                    f" after {format_duration(seconds)}, {len(produced)} package(s)")
        for path in produced:
            console.say(f"[{label}]   {path.relative_to(options.artifacts)}")
        console.log = None
    return outcome


def _with_reason(detail: str, log: Path) -> str:
    """`exit N` with the build's last error line from its log: the summary row says why."""
    reason = last_reason(log) if detail.startswith("exit ") else None
    return f"{detail}: {reason}" if reason else detail


# `docker run` / `podman run` exit statuses of the engine itself, not of the build script
ENGINE_START_FAILED = (125, 126)


def _judge(plan: BuildPlan, returncode: int, seconds: float, produced: list[Path]) -> Outcome:
    if plan.container is not None and returncode in ENGINE_START_FAILED:
        exe = shlex.quote(plan.command[0])
        return Outcome("failed", f"the engine could not start the container (exit {returncode}, "
                       f"its message is above); check that `{exe} run --rm {plan.image} true` "
                       "works here: storage driver, cgroup manager, OCI runtime, ulimits "
                       "(docs/building-locally.md)", seconds, produced)
    if returncode != 0:
        return Outcome("failed", f"exit {returncode}", seconds, produced)
    if plan.interactive:
        return Outcome("ok", "debug session", seconds, produced)
    if plan.test_only:
        return Outcome("ok", "tests only", seconds, produced)
    if not plan.marker.exists():
        return Outcome("failed", "build ended without writing its done-marker", seconds, produced)
    return Outcome("ok", "", seconds, produced)


def _out_of_space(log: Path, artifacts: Path) -> str | None:
    """Why a failed build failed, when it was a full disk; None when it was not."""
    try:
        usage = shutil.disk_usage(artifacts)
    except OSError:
        return None
    if usage.free < NEARLY_FULL_BYTES:
        return (f"build_artifacts/ ran out of disk space ({usage.free / 2**20:.0f} MB free of "
                f"{usage.total / 2**20:.0f} MB): free some there (the failed build's work "
                "folders under build_artifacts/bld can go) or move build_artifacts/ to a bigger disk")
    if log_mentions(log, DISK_FULL_MARKERS, last_bytes=LOG_TAIL_BYTES):
        return ("a disk ran out of space during the build (\"No space left on device\" in its "
                "log) while build_artifacts/ has room: the container engine's storage or /tmp; "
                "free some (docker system prune, or --prune between configs) and build again")
    return None


def _engine_still_there(outcome: Outcome, engine: engines.Engine) -> Outcome:
    """The failed outcome, or one that says the engine itself stopped answering."""
    lost = engines.unreachable_reason(engine, timeout=ENGINE_PROBE_SECONDS)
    if lost is None:
        return outcome
    return Outcome("failed", f"the {engine.kind} engine stopped answering", outcome.seconds,
                   outcome.packages, engine_lost=lost)


def _source_download_detail(plan: BuildPlan, options: Options) -> str | None:
    """The url, sha256 and --source-tarball when the log shows the source download failing."""
    if not plan.tool:
        return None
    recipe = recipe_file(options.feedstock_root, plan.tool)
    return download_failure_detail(plan.log, recipe, f"recipe/{recipe.name}")


def _finish_container(plan: BuildPlan, options: Options, outcome: Outcome, console: Console,
                      label: str) -> None:
    if plan.container is None:
        return
    engine = options.request.engine
    if outcome.engine_lost:  # nothing to remove or keep through an engine that does not answer
        console.say(f"[{label}] container {plan.container} may remain: the engine does not "
                    f"answer ({outcome.engine_lost}); once it is back: "
                    f"{engine.executable} rm -f {plan.container}")
        return
    never_ran = outcome.detail.startswith("the engine could not start")
    if outcome.status == "ok" or never_ran:  # a container that never ran holds nothing to see
        if not engines.remove_container(engine, plan.container) and not never_ran:
            console.say(f"[{label}] warning: could not remove container {plan.container}")
        return
    tag = f"{plan.container}-debug"
    console.say(f"[{label}] container kept for inspection: {plan.container}")
    console.say(f"[{label}]   enter it:  {engines.enter_command(engine, plan.container, plan.mounts, tag)}")
    console.say(f"[{label}]   remove it: {engine.executable} rm {plan.container}")


def _run_streaming(plan: BuildPlan, env: dict[str, str], console: Console, label: str,
                   started: float, options: Options, reported: list[str]) -> int:
    # the guard stops the build when this process ends, however it ends, and holds the lock
    # until the build has ended (localbuild/build_guard.py)
    engine = options.request.engine
    remove = (engines.remove_command(engine, plan.container, force=True)
              if plan.container is not None else None)
    command = guarded(plan.command, os.getpid(), location_of(plan).first_stop_signal,
                      STOP_GRACE_SECONDS, remove, plan.log)
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, cwd=str(options.feedstock_root),
                                start_new_session=True, pass_fds=held_lock_fds())
    except OSError as exc:
        console.say(f"[{label}] cannot start {plan.command[0]}: {exc.strerror or exc}")
        return 127
    note_build(plan.name, proc.pid, plan.container)
    try:
        _pump(proc, console, label, started, reported)
        return proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        raise
    finally:
        note_build(None)
        if proc.stdout is not None:
            proc.stdout.close()


def _pump(proc: subprocess.Popen, console: Console, label: str, started: float,
          reported: list[str]) -> None:
    fd = proc.stdout.fileno()
    pending = b""
    step = "starting"
    quiet_since = time.monotonic()
    while True:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            if proc.poll() is not None:
                return  # exited; a leftover background process may hold the pipe open
            if time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                console.progress(label, f"still in step '{step}', no output for "
                                 f"{format_duration(time.monotonic() - quiet_since)}", started)
                quiet_since = time.monotonic()
            continue
        data = os.read(fd, 65536)
        if not data:
            return
        quiet_since = time.monotonic()
        console.raw(data)
        pending += data
        *lines, pending = pending.split(b"\n")
        pending = pending[-65536:]
        for line in lines:
            if line.startswith(STEP_PREFIX):
                step = line[len(STEP_PREFIX):].strip().decode("utf-8", "replace")
                console.progress(label, f"step: {step}", started)
            elif line.startswith(PACKAGE_PREFIX):
                reported.append(line[len(PACKAGE_PREFIX):].strip().decode("utf-8", "replace"))


def _stop(proc: subprocess.Popen) -> None:
    """Have the guard stop the build, and wait until it has (bounded); more interrupts (a
    second Ctrl-C, a SIGTERM or hangup on top) are ignored meanwhile."""
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in INTERRUPTS}
    try:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=stop_timeout(STOP_GRACE_SECONDS))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run_interactive(plan: BuildPlan, env: dict[str, str], console: Console, label: str,
                     engine: engines.Engine) -> int:
    """--debug: the terminal belongs to the build shell; Ctrl-C goes to it, not to us."""
    console.say(f"[{label}] debug session: output is not logged; exit the shell to finish")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.run(plan.command, env=env,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
                              ).returncode
    except KeyboardInterrupt:  # SIGTERM or a closed terminal: the session's container goes too
        if plan.container is not None:
            engines.remove_container(engine, plan.container, force=True)
        raise
    except OSError as exc:
        console.say(f"[{label}] cannot start {plan.command[0]}: {exc.strerror or exc}")
        return 127
    finally:
        signal.signal(signal.SIGINT, previous)
