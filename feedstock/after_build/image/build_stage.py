"""The build stage: the image's own /opt/env on a Debian with compilers, where the requirements
that build against torch (marked --no-build-isolation) and VCS checkouts are built into wheels.

Only the wheels leave it: the runtime pip step installs them, so the runtime image has no
compiler, and the torch layer is the one every image of this build shares. The base is
mmdebstrap's minbase with g++, make, ninja (torch's extension builder compiles in parallel
with it, unless a package turns it off: torch-scatter's setup.py says use_ninja=False, so its
files compile one at a time) and git, cached like the runtime base (same suite, same host
CPython installs).

The wheels are cached by their inputs (stage_script.py): a second build of the same image
takes them from the cache instead of compiling again. The build's output is shown as it comes:
the stage's own lines, and every minute of silence the file the compiler is on.
"""
from __future__ import annotations

import hashlib
import json
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ...errors import FeedstockError
from .. import compile_cache as compiles
from ..log_lines import first_error_line
from .base import Base, debian_base, runtime_packages
from .build_tools import DEV_PREFIX, Toolset, install_dev
from .container import check_python, command_in
from .environment import PREFIX
from .layers import unpack_layers
from .pip_access import PipAccess
from .requirements import BuildItem
from .rootfs import cache_dir
from .tools import run

SCRIPT = Path(__file__).with_name("stage_script.py")
STAGE_CCACHE = "/compile-cache"   # where the compile cache folder is mounted in the build stage
TIMEOUT = 4 * 3600
HEARTBEAT = 60.0   # seconds of silence before a "still building" line
COMPILED = re.compile(r"\s-c\s+(\S+\.(?:cpp|cxx|cc|c|cu|hip))\b")


def wheel_cache() -> Path:
    """Where built wheels are kept between image builds (FEEDSTOCK_IMAGE_CACHE moves it)."""
    return cache_dir() / "build-stage-wheels"


def context_key(prefixes: list[Path], base_name: str, options: list[str], epoch: int) -> str:
    """What a wheel built here depends on besides its own archive: the conda packages of the
    image and of the build tools (conda-meta: name, version, build, sha256), the build stage's
    base, the pip option lines, SOURCE_DATE_EPOCH and the stage script itself."""
    packages = []
    for prefix in prefixes:
        for record in sorted((prefix / "conda-meta").glob("*.json")):
            data = json.loads(record.read_text())
            packages.append([prefix.name, record.name, data.get("sha256") or data.get("md5") or ""])
    inputs = {"packages": packages, "base": base_name, "options": options, "epoch": epoch,
              "script": hashlib.sha256(SCRIPT.read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def stage_base(host_pythons: list[Path], tools: Toolset) -> Base:
    """The build stage's base: the flavour's runtime packages and its compilers (cached)."""
    return debian_base(host_pythons, (*runtime_packages(tools.flavour), *tools.debian), "build")


def build_wheels(items: list[BuildItem], options: list[str], staging: Path, work: Path, engine: str,
                 find_links: Path | None, access: PipAccess, host_pythons: list[Path], epoch: int,
                 say, *, tools: Toolset, use_cache: bool = True, channels: list[str] = (),
                 cuda: str | None = None, pkgs: Path | None = None, compile_cache: Path | None = None,
                 wheel_cache_dir: Path | None = None) -> list[Path]:
    """Build `items` into wheels against the environment in `staging` (or take them from the
    wheel cache), with the flavour's `tools` (build_tools.toolset); returns the wheels. With
    `compile_cache` (a folder), the compiles go through the build base's ccache."""
    base = stage_base(host_pythons, tools)
    root = work / "build-root"
    unpack_layers([base.path], root)
    (root / "opt").mkdir(exist_ok=True)
    # hard links: the layers are already written, and the build reads the environment only
    run(["cp", "-al", str(staging / PREFIX.lstrip("/")), str(root / "opt")], "copying /opt/env into the build stage")
    try:
        if tools.conda_specs:
            say(f"image: build stage: {tools.describe()}")
            install_dev(tools, list(channels), cuda, root, pkgs or work / "pkgs")
        prefixes = [root / PREFIX.lstrip("/"), root / DEV_PREFIX.lstrip("/")]
        context = context_key(prefixes, base.path.name, options, epoch) if use_cache else None
        check_python(engine, root, "the build stage")
        return _build(items, options, root, work, engine, find_links, access, epoch, say, context, tools,
                      compile_cache, wheel_cache_dir)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _build(items: list[BuildItem], options: list[str], root: Path, work: Path, engine: str,
           find_links: Path | None, access: PipAccess, epoch: int, say, context: str | None,
           tools: Toolset, compile_cache: Path | None = None, wheel_cache_dir: Path | None = None) -> list[Path]:
    stage, out = work / "stage", work / "build-out"
    stage.mkdir()
    out.mkdir()
    shutil.copy2(SCRIPT, stage / "build_wheels.py")
    pip_args = ["--no-index", "--find-links", "/pip-links"] if find_links is not None else []
    (stage / "plan.json").write_text(json.dumps({
        "options": options, "pip_args": pip_args, "context": context,
        "items": [{"requirement": item.requirement, "isolated": item.isolated} for item in items]}))
    mounts = ["-v", f"{stage}:/stage:ro", "-v", f"{out}:/build:rw"]
    if find_links is not None:
        mounts += ["-v", f"{find_links.resolve()}:/pip-links:ro"]
    if context is not None:
        cache = wheel_cache_dir or wheel_cache()
        cache.mkdir(parents=True, exist_ok=True)
        mounts += ["-v", f"{cache}:/wheel-cache:rw"]
    cached = []
    if compile_cache is not None:
        compile_cache.mkdir(parents=True, exist_ok=True)
        mounts += ["-v", f"{compile_cache}:{STAGE_CCACHE}:rw"]
        # the sources are unpacked below /build: paths there hash relative to it
        variables = compiles.environment(STAGE_CCACHE, "/build/ccache-stats.log", base_dir="/build")
        cached = [arg for name, value in sorted(variables.items()) for arg in ("-e", f"{name}={value}")]
    say(f"image: build stage: {len(items)} package(s) to build against the image's torch"
        + ("" if context is not None else " (--no-wheel-cache: compiled again)"))
    command = command_in(engine, root, [f"{PREFIX}/bin/python", "/stage/build_wheels.py", "/stage/plan.json"],
                         mounts=mounts, network="none" if find_links is not None else "host",
                         extra=[*access.podman_args(), *tools.engine_args(), *cached, "-e", f"SOURCE_DATE_EPOCH={epoch}"])
    returncode, stdout, stderr = _follow(command, say)
    if compile_cache is not None:
        counted = compiles.count_compiles(out / "ccache-stats.log")
        if counted.compiled:
            say(f"image: build stage: {counted.line()} (ccache in {compile_cache})")
    if returncode != 0 and finished_anyway(out, stderr):
        say(f"image: build stage: {engine} reported exit {returncode}, but the stage finished (its "
            "done.json lists every wheel, and they are here): going on")
    elif returncode != 0:
        raise FeedstockError(_failure(items, stdout, stderr), exit_code=1)
    wheels = sorted((out / "wheels").glob("*.whl"))
    say(f"image: build stage: {wheel_kinds(wheels)}")
    return wheels


def finished_anyway(out: Path, stderr: str) -> bool:
    """Whether the stage finished although the engine said otherwise (podman loses a finished
    container's exit code: "no such exit code"): its script wrote done.json last, naming wheels
    that are all here, and no item failed."""
    try:
        listed = json.loads((out / "done.json").read_text())["wheels"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return ("::failed " not in stderr and isinstance(listed, list) and bool(listed)
            and all(isinstance(name, str) and (out / "wheels" / name).is_file() for name in listed))


def wheel_kinds(wheels: list[Path]) -> str:
    """'2 wheel(s) with compiled code, 1 pure Python': a marked package that compiles nothing
    (its wheel's tag ends in none-any) is passed through, not built against torch."""
    pure = sum(wheel.name.endswith("-none-any.whl") for wheel in wheels)
    return (f"{len(wheels) - pure} wheel(s) with compiled code"
            + (f", {pure} pure Python (nothing compiled)" if pure else ""))


def _follow(command: list[str], say) -> tuple[int, str, str]:
    """Run the stage, showing its own lines as they come and, after a minute without one, the
    file being compiled; returns (exit status, stdout, stderr)."""
    lines: queue.Queue[str | None] = queue.Queue()
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, errors="replace")

        def read() -> None:
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        try:
            return _show(proc, lines, errors, say)
        except BaseException:   # Ctrl-C or SIGTERM: the stage's container goes too
            proc.kill()
            proc.wait()
            raise


def _show(proc: subprocess.Popen, lines: "queue.Queue[str | None]", errors, say) -> tuple[int, str, str]:
    kept: list[str] = []
    started = shown = time.monotonic()
    compiling = ""
    while True:
        try:
            line = lines.get(timeout=min(5.0, HEARTBEAT / 4))
        except queue.Empty:
            line = ""
        if line is None:
            break
        now = time.monotonic()
        if now - started > TIMEOUT:
            proc.kill()
            proc.wait()
            return 124, "".join(kept), f"the build stage ran over {TIMEOUT // 3600} hours and was stopped"
        if line:
            kept.append(line)
            found = COMPILED.search(line)
            compiling = Path(found.group(1)).name if found else compiling
            if line.startswith("build stage: "):
                say(f"image: {line.rstrip()}")
                shown = now
        if now - shown >= HEARTBEAT:
            say(f"image: build stage: still building ({(now - started) / 60:.0f} min"
                + (f"; compiling {compiling}" if compiling else "") + ")")
            shown = now
    proc.wait()
    errors.seek(0)
    return proc.returncode, "".join(kept), errors.read()


def _failure(items: list[BuildItem], stdout: str, stderr: str) -> str:
    """One line: which requirement, and the first error line of its build."""
    marker = next((line for line in stderr.splitlines() if line.startswith("::failed ")), "")
    if not marker:
        tail = " ".join((stderr.strip() or stdout.strip()).split())[-300:]
        return f"the build stage failed: {tail}"
    number = int(marker.split()[1].rstrip(":"))
    item = items[number]
    output = stdout.split(f"::item {number}\n", 1)[-1]
    line = first_error_line(output) or marker
    return f"{item.where}: building {item.requirement!r} in the build stage failed: {line}"
