"""Stopped means clean (issue 48, part 5), with real processes and signals: a supervisor's stop
(SIGTERM, then SIGKILL 5 s later, as `timeout -k 5` and systemd give it; or SIGKILL of every
process at once, as a cgroup kill does) of `--all --dry-run` and of a `--develop` build leaves
nothing the next run does not remove: the temp dir and the user's cache are then as they were
before the first run, and no process of the stopped run is left 10 s after it died.
The image command's side: tests/feedstock/after_build/image/test_stopped_image.py."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localbuild.configs import host_platform
from tests.support.build_locally import make_feedstock
from tests.support.paths import REPO_ROOT
from tests.support.processes import commands, processes_naming, wait_until_none_names
from tests.support.stops import snapshot, supervisor_stop
from tests.support.develop_checkout import stand_in_checkout

CPU_MKL = "linux_64_blas_implmklcuda_compiler_versionNone"
ORPHAN_DEADLINE = 10.0

pytestmark = pytest.mark.skipif(host_platform() != "linux-64",
                                reason=f"the test configs are linux-64; this host is {host_platform()}")


def private_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """TMPDIR and HOME (the user's cache) of the test's own, empty."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    (tmp_path / "home").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "HOME": str(tmp_path / "home"), **extra}


def kill_everything_of(pids: list[int]) -> None:
    """SIGKILL to each at once: systemd's cgroup kill, Slurm's step kill."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(condition, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the moment to stop it never came"
        time.sleep(0.02)


# -- --all --dry-run: its temp folder and its render children --------------------------------------

def dry_run(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(REPO_ROOT / "build-locally.py"), "--all", "--dry-run"],
                            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.parametrize("how", ["SIGTERM then SIGKILL", "kill -9"])
def test_a_stopped_dry_run_leaves_nothing_the_next_does_not_remove(tmp_path, how):
    env = private_env(tmp_path)
    before = snapshot(tmp_path / "tmp", tmp_path / "home")
    proc = dry_run(env)
    # the moment of the facts: its render children run in its temp folder
    wait_for(lambda: processes_naming(f"build-locally-dry-run-{proc.pid}-"), proc)
    children = processes_naming(f"build-locally-dry-run-{proc.pid}-")
    if how == "kill -9":
        proc.kill()
        proc.wait()
        ended = "SIGKILL"
    else:
        ended = supervisor_stop(proc)
    wait_until_none_names(f"build-locally-dry-run-{proc.pid}-", ORPHAN_DEADLINE)
    print(f"dry run ({how}): {ended}; its {len(children)} render processes gone")
    again = dry_run(env)
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-2000:]
    assert snapshot(tmp_path / "tmp", tmp_path / "home") == before


# -- a --develop build ---------------------------------------------------------------------------------

def develop_feedstock(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """--develop --native with a stand-in for py-rattler's Python: as develop.py it writes into
    its TMPDIR (pip's build folders, a compiler's files), starts a "compiler" and waits for it. Returns (arguments, the stand-in, the file saying it compiles)."""
    fs = make_feedstock(tmp_path, configs={CPU_MKL: {}})
    ready = tmp_path / "compiling"
    python = fs.bin_dir / "rattler-python"
    python.write_text(
        '#!/bin/sh\n[ "$1" = -c ] && exit 0   # the preflight: import rattler, rattler_build\n'
        'mkdir -p "$TMPDIR/pip-build-env-x" && echo partial > "$TMPDIR/cc1234.s"\n'
        f'exec "{sys.executable}" -S -c "import os, subprocess; '
        "child = subprocess.Popen(['sleep', '300']); "
        f"open('{ready}.tmp', 'w').write(str(child.pid)); os.replace('{ready}.tmp', '{ready}'); child.wait()\"\n")
    python.chmod(0o755)
    (fs.root / "recipe" / "recipe.yaml").write_text("context:\n  version: 2.14.1\n")
    checkout = stand_in_checkout(tmp_path / "pytorch")
    return [str(fs.root / "build-locally.py"), CPU_MKL, "--develop", str(checkout), "--native",
            "--min-free-gb", "0"], python, ready


@pytest.mark.parametrize("how", ["SIGTERM then SIGKILL", "SIGKILL to all at once"])
def test_a_stopped_develop_build_leaves_nothing_the_next_does_not_remove(tmp_path, how):
    args, python, compiling = develop_feedstock(tmp_path)
    root = str(Path(args[0]).parent)
    env = private_env(tmp_path, PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}",
                      RATTLER_BUILD_PYTHON=str(python))
    before = snapshot(tmp_path / "tmp", tmp_path / "home")
    proc = subprocess.Popen([sys.executable, "-S", *args], cwd=root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for(compiling.exists, proc)
    assert any((tmp_path / "tmp").glob("build-locally-tmp-*/cc1234.s"))   # the build's TMPDIR is the guard's
    if how == "SIGKILL to all at once":
        kill_everything_of([proc.pid, *processes_naming(root)])
        proc.wait()
        ended = "SIGKILL"
    else:
        ended = supervisor_stop(proc)
    took = wait_until_none_names(root, ORPHAN_DEADLINE)
    print(f"--develop ({how}): {ended}; its build gone {took:.2f} s later; left in TMPDIR: "
          f"{sorted(p.name for p in (tmp_path / 'tmp').iterdir())}")
    again = subprocess.run([sys.executable, "-S", *args, "--no-wait"], cwd=root, capture_output=True, text=True,
                           env=dict(env, RATTLER_BUILD_PYTHON="/bin/true"), timeout=120)
    assert again.returncode != 4, again.stderr     # the folder is free
    assert processes_naming(root) == [], commands(processes_naming(root))
    assert snapshot(tmp_path / "tmp", tmp_path / "home") == before
