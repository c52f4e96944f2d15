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
import subprocess
import tempfile
from pathlib import Path

SUITE = "bookworm"
SOURCE_DATE_EPOCH = "1700000000"  # a fixed date: the same inputs give the same base tar
# nobody reads these in a container; vfs copies every byte of an image per container
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*",
                 "/usr/share/lintian/*")


class RootfsError(Exception):
    """One line for the user."""


def cache_dir() -> Path:
    return Path(os.environ.get("FEEDSTOCK_IMAGE_CACHE")
                or Path.home() / ".cache" / "pytorch-feedstock" / "stand-in-image")


def cache_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def copy_home_hook(home: Path) -> str:
    """An mmdebstrap hook copying a host folder (a CPython install) to the same path, without
    its site-packages and tests."""
    return (f"tar -C / --exclude=site-packages --exclude=test -cf - "
            f"{str(home).lstrip('/')} | tar -C \"$1\" -xf -")


def run_to_its_end(command: list[str], env: dict[str, str], grace: float = 60) -> subprocess.CompletedProcess:
    """Run a child that cleans up after itself when asked to stop. On Ctrl-C, or SIGTERM raised
    as KeyboardInterrupt, it gets SIGTERM and `grace` seconds to unmount and remove what it made
    (SIGKILL, subprocess.run's answer, left mmdebstrap's GB-sized root behind), then the
    interruption goes on."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=grace)   # not its output: a grandchild may hold the pipes open
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
        raise
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def debian_rootfs(target: Path, packages: tuple[str, ...], hooks: list[str],
                  excludes: tuple[str, ...] = DPKG_EXCLUDES) -> None:
    """mmdebstrap's minbase with `packages`, customised by `hooks` ("$1" is the root), written
    to a temp file beside `target`, then renamed: a failed run leaves no tar behind."""
    if shutil.which("mmdebstrap") is None:
        raise RootfsError("mmdebstrap not found; install it (apt-get install mmdebstrap)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        partial = Path(tmp) / "rootfs.tar"
        command = ["mmdebstrap", "--variant=minbase", "--mode=root", "--quiet",
                   "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr", "--skip=output/dev",
                   f"--include={','.join(packages)}",
                   *[f"--dpkgopt=path-exclude={path}" for path in excludes],
                   *[f"--customize-hook={hook}" for hook in hooks], SUITE, str(partial)]
        # mmdebstrap's own temporary root goes into ours, removed with it whatever happens
        env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH, TMPDIR=tmp)
        proc = run_to_its_end(command, env)
        if proc.returncode != 0:
            raise RootfsError(f"mmdebstrap failed: {proc.stderr.strip()[-400:]}")
        os.replace(partial, target)
