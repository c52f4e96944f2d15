"""Stopped means clean for `python -m feedstock image` (issue 48, part 5): stopped while
mmdebstrap builds its base, by a supervisor (SIGTERM, then SIGKILL 5 s later) or by kill -9, it
leaves no process 10 s later and no mount; the next run removes what it left (the partial image
beside --output, mmdebstrap's root in the cache), so the temp dir, the cache and --output's
folder are then as they were before the first run.

The channel holds stand-in packages (pytorch-cpu, pytorch, libtorch, python, pip) made by
rattler-build: the solve needs only their names, and the base comes before anything installs.
The next run is the same command against an empty channel: it cleans up first, then stops at
its solve (exit 2), seconds instead of mmdebstrap's minute."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.processes import commands, processes_naming, wait_until_none_names
from tests.support.stops import snapshot, supervisor_stop

pytestmark = [pytest.mark.packages, pytest.mark.image,
              pytest.mark.skipif(not all(shutil.which(t) for t in ("mmdebstrap", "umoci", "skopeo", "unshare")),
                                 reason="needs mmdebstrap, umoci, skopeo and unshare (apt-get install them)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="mmdebstrap --mode=root needs root")]

STAND_INS = {"pytorch-cpu": ["pytorch"], "pytorch": ["libtorch"], "libtorch": [], "python": [], "pip": []}
VERSIONS = {"python": "3.11.9", "pip": "24.0"}


@pytest.fixture(scope="module")
def channels(tmp_path_factory) -> tuple[Path, Path]:
    """(a channel of stand-ins that solves, an empty one)."""
    pytest.importorskip("rattler_build")
    base = tmp_path_factory.mktemp("stand-ins")
    empty = base / "empty"
    for subdir in ("linux-64", "noarch"):
        (empty / subdir).mkdir(parents=True)
        (empty / subdir / "repodata.json").write_text(
            '{"info": {"subdir": "%s"}, "packages": {}, "packages.conda": {}}' % subdir)
    out = base / "channel"
    for name, depends in STAND_INS.items():
        recipe = base / name / "recipe.yaml"
        recipe.parent.mkdir()
        run = "".join(f"\n    - {d}" for d in depends) or " []"
        recipe.write_text(f'package: {{name: {name}, version: "{VERSIONS.get(name, "2.13.0")}"}}\n'
                          f"requirements:\n  run:{run}\n")
        proc = subprocess.run([sys.executable, str(REPO_ROOT / "localbuild/in_container/rattler_build_py.py"),
                               "build", "--recipe", str(recipe), "--output-dir", str(out), "-c", str(empty)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    for scratch in ("bld", "src_cache", "test"):
        shutil.rmtree(out / scratch, ignore_errors=True)
    return out, empty


def _image(channel: str, folders: dict[str, Path]) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(folders["tmp"]), "HOME": str(folders["home"]),
           "FEEDSTOCK_IMAGE_CACHE": str(folders["cache"])}
    return subprocess.Popen([sys.executable, "-m", "feedstock", "image", "--channel", channel, "--flavour", "cpu",
                             "--python", "3.11", "--output", str(folders["out"] / "img")], cwd=REPO_ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _mounts_under(folder: Path) -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(folder) in line]


@pytest.mark.parametrize("how", ["SIGTERM then SIGKILL", "kill -9"])
def test_an_image_stopped_during_mmdebstrap_leaves_nothing_the_next_run_does_not_remove(tmp_path, channels, how):
    channel, empty = channels
    folders = {name: tmp_path / name for name in ("tmp", "home", "cache", "out")}
    for folder in folders.values():
        folder.mkdir()
    before = snapshot(*folders.values())
    proc = _image(str(channel), folders)
    deadline = time.monotonic() + 120
    # mmdebstrap at work: its root in the cache has the first packages unpacked
    while not list(folders["cache"].glob("tmp-*/*/var/cache/apt/archives/*.deb")):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "mmdebstrap did not get going"
        time.sleep(0.1)
    started = time.monotonic()
    if how == "kill -9":
        proc.kill()
        proc.wait()
        ended = "SIGKILL"
    else:
        ended = supervisor_stop(proc)
    stopped = time.monotonic() - started
    took = wait_until_none_names(str(folders["cache"]), 10.0)
    assert _mounts_under(folders["cache"]) == []
    left = snapshot(*folders.values())
    print(f"image ({how}): {ended} after {stopped:.1f} s; no process {took:.2f} s later; "
          f"left: {[p for paths in left.values() for p in paths if '/' not in p]}")
    again = _image(empty.as_uri(), folders)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 2 and err.strip().splitlines()[-1].startswith("error: cannot solve"), err[-2000:]
    assert processes_naming(str(folders["cache"])) == [], commands(processes_naming(str(folders["cache"])))
    assert snapshot(*folders.values()) == before
