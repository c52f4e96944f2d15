"""Heavy shared builds kept once per machine, keyed by their inputs (issue 34): the toolchain
channel and the feedstock's packages from the real wheels are built by the first run whose
inputs are new, and every later run with the same inputs (a second CI run, a developer's rerun)
loads them.

The key is a hash of what the build reads: the files (`inputs_key`: every file's relative name
and bytes under the given paths, byte code left out) and strings naming the machine's side
(tool versions, interpreter paths, the wheel's hash). Any change to them is a new key and a new
build; the entry of the old key is removed then, so one entry per build name is kept.

An entry is complete once its `result.pickle` is written, last; an entry without one (a run
killed halfway) is removed before building again. A file lock per build name makes runs and
workers take turns. A skip or a failure leaves no entry.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from tests.support.paths import REPO_ROOT, cache_root

T = TypeVar("T")
RESULT = "result.pickle"


def inputs_key(paths: Iterable[Path], *extra: str, base: Path = REPO_ROOT) -> str:
    """sha256 of every file under `paths` (name relative to `base`, bytes) and `extra`."""
    digest = hashlib.sha256()
    for path in sorted({Path(p) for p in paths}):
        files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            name = file.relative_to(base) if file.is_relative_to(base) else file
            digest.update(f"{name}\0".encode() + file.read_bytes() + b"\0")
    for text in extra:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()[:20]


def machine_root() -> Path:
    return cache_root() / "shared-builds"


def cached_build(name: str, key: str, build: Callable[[Path], T], root: Path | None = None) -> T:
    """build(entry) once per machine and key; the pickled result in every later call."""
    base = (root or machine_root()) / name
    base.mkdir(parents=True, exist_ok=True)
    entry = base / key
    with (base / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # released when the file closes, also on a crash
        if (entry / RESULT).is_file():
            return pickle.loads((entry / RESULT).read_bytes())
        for old in base.iterdir():   # other keys, and this one's unfinished try
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        entry.mkdir()
        try:
            value = build(entry)
        except BaseException:
            shutil.rmtree(entry, ignore_errors=True)
            raise
        partial = entry / f"{RESULT}.partial-{os.getpid()}"
        partial.write_bytes(pickle.dumps(value))
        partial.replace(entry / RESULT)
        return value


def toolchain_key(versions: dict[str, str], pythons: dict[str, Path]) -> str:
    """The toolchain channel's inputs: the code that makes it, the pins, the recipe's requirements
    for the jobs (recipe.yaml, .ci_support), this machine's tool versions and interpreters, and
    rattler-build's version."""
    import platform
    import subprocess
    from importlib.metadata import version

    support = REPO_ROOT / "tests" / "support"
    interpreters = [f"{v}={path}:" + subprocess.run([str(path), "-c", "import platform; print(platform.python_version())"],
                                                    capture_output=True, text=True).stdout.strip()
                    for v, path in sorted(pythons.items())]
    return inputs_key([support / "toolchain.py", support / "build_tools.py", support / "channel-requirements.txt",
                       support / "real_wheel" / "prefix-requirements.txt", REPO_ROOT / "recipe" / "recipe.yaml",
                       REPO_ROOT / "recipe" / "conda_build_config.yaml", REPO_ROOT / ".ci_support"],
                      json.dumps(versions, sort_keys=True), *interpreters, version("py-rattler-build"),
                      platform.libc_ver()[1])
