"""A session fixture's result built once for the whole run, also with several pytest-xdist workers.

The first worker that asks builds it in a folder beside the workers' own temp folders (the run's
base temp), holding a lock; the others wait on that lock and load the pickled result. A skip is
shared the same way (its reason is kept), so every worker skips with the same line, and so is a
failure: the others fail naming it instead of building again into its leftovers. Without
xdist the folder is under the run's own base temp, as tmp_path_factory's would be.
"""
from __future__ import annotations

import fcntl
import json
import os
import pickle
import time
from pathlib import Path
from typing import Callable, TypeVar

import pytest

from tests.support.machine_cache import cached_build

T = TypeVar("T")


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run sees (the base temp of the run, not of one worker)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T],
               machine_key: str | None = None) -> T:
    """build(folder) in the first worker that asks; the pickled result in every other. With
    `machine_key` (machine_cache.inputs_key), the folder is the machine's entry for that key, and a
    run that finds it complete loads it instead of building (tests/support/machine_cache.py)."""
    root = shared_root(tmp_path_factory)
    folder = root / f"shared-{name}"
    result, skipped, failed = folder / "result.pickle", folder / "skipped.txt", folder / "failed.txt"
    with (root / f"shared-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # released when the file closes, also on a crash
        if result.is_file():
            return pickle.loads(result.read_bytes())
        if skipped.is_file():
            pytest.skip(skipped.read_text())
        if failed.is_file():
            # a second try would build into the first one's leftovers; its error is the one to read
            pytest.fail(f"the shared fixture {name!r} failed in another worker: {failed.read_text()}",
                        pytrace=False)
        folder.mkdir(exist_ok=True)
        started = time.monotonic()
        try:
            value = cached_build(name, machine_key, build) if machine_key else build(folder)
        except pytest.skip.Exception as err:
            skipped.write_text(str(err.msg) if hasattr(err, "msg") else str(err))
            raise
        except BaseException as err:
            failed.write_text(f"{type(err).__name__}: {' '.join(str(err).split())[:500]}")
            raise
        partial = folder / "result.pickle.partial"
        partial.write_bytes(pickle.dumps(value))
        partial.replace(result)
        _timeline(name + (f" (machine cache {machine_key})" if machine_key else ""), time.monotonic() - started)
        return value


def write_timeline(**fields: object) -> None:
    """With FEEDSTOCK_TEST_TIMELINE=DIR, one JSON line (the time it ended, the worker, `fields`)
    appended to DIR/timeline-<worker>.jsonl (the folder made if needed): tests/conftest.py writes
    one per test phase, `_timeline` one per shared build."""
    folder = os.environ.get("FEEDSTOCK_TEST_TIMELINE")
    if not folder:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"timeline-{worker}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"end": round(time.time(), 2), "worker": worker, **fields}) + "\n")


def _timeline(name: str, seconds: float) -> None:
    """Which part of a module's setup was the shared work."""
    write_timeline(shared=name, seconds=round(seconds, 2))
