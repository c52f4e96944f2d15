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
        env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)
        proc = subprocess.run(command, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RootfsError(f"mmdebstrap failed: {proc.stderr.strip()[-400:]}")
        os.replace(partial, target)
