"""The build stage: the image's own /opt/env on a Debian with compilers, where the requirements
that build against torch (marked --no-build-isolation) and VCS checkouts are built into wheels.

Only the wheels leave it: the runtime pip step installs them, so the runtime image has no
compiler, and the torch layer is the one every image of this build shares. The base is
mmdebstrap's minbase with g++, make, ninja (torch's extension builder compiles in parallel
with it) and git, cached like the runtime base (same suite, same host CPython installs).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from ...errors import FeedstockError
from ..log_lines import first_error_line
from .base import PACKAGES, debian_base
from .container import check_python, run_in
from .environment import PREFIX
from .pip_access import PipAccess
from .requirements import BuildItem
from .tools import run

BUILD_PACKAGES = (*PACKAGES, "g++", "make", "ninja-build", "git")
SCRIPT = Path(__file__).with_name("stage_script.py")


def build_wheels(items: list[BuildItem], options: list[str], staging: Path, work: Path, engine: str,
                 find_links: Path | None, access: PipAccess, host_pythons: list[Path], epoch: int,
                 say=print) -> list[Path]:
    """Build `items` into wheels against the environment in `staging`; returns the wheels."""
    base = debian_base(host_pythons, BUILD_PACKAGES, "build")
    root = work / "build-root"
    (root / "opt").mkdir(parents=True)
    run(["tar", "-C", str(root), "--numeric-owner", "-xpf", str(base.path)], "unpacking the build stage's base")
    # hard links: the layers are already written, and the build reads the environment only
    run(["cp", "-al", str(staging / PREFIX.lstrip("/")), str(root / "opt")], "copying /opt/env into the build stage")
    try:
        check_python(engine, root, "the build stage")
        return _build(items, options, root, work, engine, find_links, access, epoch, say)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _build(items: list[BuildItem], options: list[str], root: Path, work: Path, engine: str,
           find_links: Path | None, access: PipAccess, epoch: int, say) -> list[Path]:
    stage, out = work / "stage", work / "build-out"
    stage.mkdir()
    out.mkdir()
    shutil.copy2(SCRIPT, stage / "build_wheels.py")
    pip_args = ["--no-index", "--find-links", "/pip-links"] if find_links is not None else []
    (stage / "plan.json").write_text(json.dumps({
        "options": options, "pip_args": pip_args,
        "items": [{"requirement": item.requirement, "isolated": item.isolated} for item in items]}))
    mounts = ["-v", f"{stage}:/stage:ro", "-v", f"{out}:/build:rw"]
    if find_links is not None:
        mounts += ["-v", f"{find_links.resolve()}:/pip-links:ro"]
    say(f"image: build stage: {len(items)} package(s) built against the image's torch")
    proc = run_in(engine, root, [f"{PREFIX}/bin/python", "/stage/build_wheels.py", "/stage/plan.json"],
                  mounts=mounts, network="none" if find_links is not None else "host",
                  extra=[*access.podman_args(), "-e", f"SOURCE_DATE_EPOCH={epoch}"], timeout=4 * 3600)
    for line in proc.stdout.splitlines():
        if line.startswith("build stage: "):
            say(f"image: {line}")
    if proc.returncode != 0:
        raise FeedstockError(_failure(items, proc.stdout, proc.stderr), exit_code=1)
    return sorted((out / "wheels").glob("*.whl"))


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
