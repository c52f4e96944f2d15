"""A minimal Debian rootfs tar from mmdebstrap, cached by its inputs (standard library only).

Shared by devtools/stand_in_image.py (the build image) and `python -m feedstock image` (the base
of the runtime images). With SOURCE_DATE_EPOCH fixed mmdebstrap writes the same bytes for the
same inputs, so the cache key is the inputs and a cached tar is as good as a fresh one.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from common.child_lifetime import tied
from common.owned_folders import owned_prefix, remove_stale

SUITE = "bookworm"
ROOT_PREFIX = "tmp-"   # mmdebstrap's folder in the cache: tmp-<our pid>-<random> (common.owned_folders)
SOURCE_DATE_EPOCH = "1700000000"  # a fixed date: the same inputs give the same base tar
# nobody reads these in a container; vfs copies every byte of an image per container
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*",
                 "/usr/share/lintian/*")


class RootfsError(Exception):
    """One line for the user."""


def cache_dir() -> Path:
    return Path(os.environ.get("FEEDSTOCK_IMAGE_CACHE")
                or Path.home() / ".cache" / "pytorch-feedstock" / "stand-in-image")


def remove_stale_roots() -> list[Path]:
    """The mmdebstrap roots that runs killed before they could remove them (every image run
    calls this, a cached base or not)."""
    return remove_stale(cache_dir(), ROOT_PREFIX)


def cache_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def copy_home_hook(home: Path) -> str:
    """An mmdebstrap hook copying a host folder (a CPython install) to the same path, without
    its site-packages and tests."""
    return (f"tar -C / --exclude=site-packages --exclude=test -cf - "
            f"{str(home).lstrip('/')} | tar -C \"$1\" -xf -")


def in_own_namespaces(command: list[str]) -> list[str]:
    """`command` as the first process of a pid namespace and with a mount namespace of its own
    (root only, where util-linux's unshare is): when it dies, the kernel kills every process it
    started and its mounts (the root's proc, sys, dev) go with the namespace, even after a
    kill -9 of us."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return command
    return [unshare, "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child=SIGKILL", *command]


def run_to_its_end(command: list[str], env: dict[str, str], grace: float = 60) -> subprocess.CompletedProcess:
    """Run a child whose work must not outlive us. It dies with us (SIGKILL when we die). On
    Ctrl-C, or SIGTERM raised as KeyboardInterrupt: where it runs in its own namespaces
    (in_own_namespaces), its namespace is killed at once, which ends its processes and its
    mounts; otherwise it gets SIGTERM and `grace` seconds to unmount and remove what it made
    (SIGKILL, subprocess.run's answer, left mmdebstrap's GB-sized root behind). Then the
    interruption goes on."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=tied(signal.SIGKILL))
    try:
        out, err = proc.communicate()
    except BaseException:
        _stop(proc, grace, namespaced=Path(command[0]).name == "unshare")
        raise
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _stop(proc: subprocess.Popen, grace: float, namespaced: bool) -> None:
    first = _children(proc.pid) if namespaced else []
    if first:
        for pid in first:   # the namespace's first process: its end is the namespace's
            os.kill(pid, signal.SIGKILL)
    else:
        proc.terminate()
    try:
        proc.wait(timeout=grace)   # not its output: a grandchild may hold the pipes open
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        pipe.close()


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def debian_rootfs(target: Path, packages: tuple[str, ...], hooks: list[str],
                  excludes: tuple[str, ...] = DPKG_EXCLUDES) -> None:
    """mmdebstrap's minbase with `packages`, customised by `hooks` ("$1" is the root), written
    to a temp file beside `target`, then renamed: a failed run leaves no tar behind."""
    if shutil.which("mmdebstrap") is None:
        raise RootfsError("mmdebstrap not found; install it (apt-get install mmdebstrap)")
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target.parent, ROOT_PREFIX)   # the roots of killed runs
    with tempfile.TemporaryDirectory(prefix=owned_prefix(ROOT_PREFIX), dir=target.parent) as tmp:
        partial = Path(tmp) / "rootfs.tar"
        command = ["mmdebstrap", "--variant=minbase", "--mode=root", "--quiet",
                   "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr", "--skip=output/dev",
                   f"--include={','.join(packages)}",
                   *[f"--dpkgopt=path-exclude={path}" for path in excludes],
                   *[f"--customize-hook={hook}" for hook in hooks], SUITE, str(partial)]
        # mmdebstrap's own temporary root goes into ours, removed with it whatever happens
        env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH, TMPDIR=tmp)
        proc = run_to_its_end(in_own_namespaces(command), env)
        if proc.returncode != 0:
            raise RootfsError(f"mmdebstrap failed: {proc.stderr.strip()[-400:]}")
        os.replace(partial, target)
