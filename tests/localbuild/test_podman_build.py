"""build-locally.py in a real container engine: podman with this machine's private configuration,
the stand-in build image from devtools/stand_in_image.py, the feedstock's recipe.yaml building
the PyTorch-shaped test project with rattler-build against the local toolchain channel (given
with --channel; the config itself keeps conda-forge as its channel_sources).

One real build per session, run on behalf of a non-root user (SUDO_UID, as under sudo); the
other tests use configs that fail early or are interrupted, so the module stays in minutes.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from localbuild.engine import LABEL
from tests.support.paths import RECIPE_VERSION
from tests.support.podman import (CPU, FAILING, FAILING_TOO, INTERRUPTED, NO_IMAGE, PYTHON, Podman,
                                  build_stand_in_image, config_texts, podman_feedstock,
                                  podman_unavailable, private_podman)
from tests.support.terminal import in_a_terminal, line_after

ON_BEHALF_OF = 4321      # SUDO_UID: the user a root run builds for


@dataclass
class Rig:
    root: Path
    podman: Podman
    channel: Path
    env: dict[str, str]
    first: subprocess.CompletedProcess
    build_seconds: float
    image_seconds: float

    def args(self, *configs: str) -> list[str]:
        # --min-free-gb: the configs' estimates are for real PyTorch, not the test project
        return [*configs, "--engine", "podman", "--tool", "rattler-build", "--channel",
                str(self.channel), "--skip-tests", "--jobs", "2", "--min-free-gb", "2"]

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(self.root / "build-locally.py"), *args],
                              cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    @property
    def artifacts(self) -> Path:
        return self.root / "build_artifacts"


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, realbuild_toolchain: dict,
        cpythons: dict[str, Path]) -> Iterator[Rig]:
    reason = podman_unavailable()
    if reason:
        pytest.skip(reason)
    from tests.realbuild.feedstock_build import prepare_project_source

    work = tmp_path_factory.mktemp("podman")
    podman = private_podman(work / "podman")
    root = podman_feedstock(work / "feedstock", prepare_project_source(work / "source"),
                            config_texts(realbuild_toolchain["versions"], work))
    started = time.monotonic()
    build_stand_in_image(podman, root, CPU, [cpythons[PYTHON]])
    image_seconds = time.monotonic() - started
    env = dict(podman.env, SUDO_UID=str(ON_BEHALF_OF), CPU_COUNT="2")
    rig = Rig(root, podman, realbuild_toolchain["toolchain"].channel, env, None, 0.0, image_seconds)
    started = time.monotonic()
    rig.first = rig.run(*rig.args(CPU), timeout=1800)
    rig.build_seconds = time.monotonic() - started
    yield rig
    # the image store (with vfs also a full copy of the image per container): give the disk back
    podman.run("system", "reset", "--force", check=False)


def test_the_build_lands_in_build_artifacts_owned_by_the_user(rig):
    out = rig.first.stdout + rig.first.stderr
    assert rig.first.returncode == 0, out[-3000:]
    names = sorted(p.name for p in (rig.artifacts / "linux-64").glob("*.conda"))
    assert any(n.startswith(f"libtorch-{RECIPE_VERSION}-cpu_generic_h") for n in names), names
    assert any(n.startswith(f"pytorch-{RECIPE_VERSION}-cpu_generic_py312_h") for n in names), names
    assert any(n.startswith(f"pytorch-cpu-{RECIPE_VERSION}-") for n in names), names
    assert (rig.artifacts / "linux-64" / "repodata.json").is_file()
    assert (rig.artifacts / f"conda-forge-build-done-{CPU}").is_file()
    log = (rig.artifacts / f"{CPU}-log.txt").read_text()
    assert "::build-locally-step:: build recipe" in log and "podman run" in log
    # --channel replaced channel_sources in the derived config the container built with
    derived = yaml.safe_load((rig.artifacts / "localbuild" / f"{CPU}.yaml").read_text())
    assert derived["channel_sources"] == [str(rig.channel)]
    not_theirs = [str(p) for p in [rig.artifacts, *rig.artifacts.rglob("*")]
                  if p.lstat().st_uid != ON_BEHALF_OF]
    assert not not_theirs, not_theirs[:10]
    print(f"podman build: {rig.build_seconds:.0f}s (stand-in image {rig.image_seconds:.0f}s)")


def test_the_container_is_removed_after_success(rig):
    assert rig.first.returncode == 0
    assert rig.podman.containers(f"{LABEL}={CPU}") == []


def test_a_second_run_skips_the_done_config(rig):
    assert rig.first.returncode == 0
    proc = rig.run(*rig.args(CPU))
    assert proc.returncode == 0, proc.stderr
    assert "already built" in proc.stdout and "start:" not in proc.stdout, proc.stdout


def test_test_only_runs_the_packages_tests_in_a_container(rig):
    assert rig.first.returncode == 0
    before = sorted((rig.artifacts / "linux-64").glob("*.conda"))
    marker = rig.artifacts / f"conda-forge-build-done-{CPU}"
    stamp = marker.stat().st_mtime_ns
    args = [arg for arg in rig.args(CPU) if arg != "--skip-tests"]
    proc = rig.run(*args, "--test-only")
    out = proc.stdout
    # every package of the config is tested; the test project is not PyTorch, so the tests
    # that ask for torch.__version__ / torch.backends (and libtorch's cmake test) fail
    tested = {line.split(": ", 1)[1].split(f"-{RECIPE_VERSION}")[0] for line in out.splitlines()
              if "test passed: " in line or "test FAILED: " in line}
    assert tested == {"libtorch", "pytorch", "pytorch-cpu", "pytorch-tests"}, out[-3000:]
    assert f"test passed: pytorch-tests-{RECIPE_VERSION}-" in out and "in 4 package(s)" in out, out[-3000:]
    assert proc.returncode == 1 and "has no attribute 'backends'" in out, out[-3000:]
    assert sorted((rig.artifacts / "linux-64").glob("*.conda")) == before
    assert marker.stat().st_mtime_ns == stamp
    for name in rig.podman.containers(f"{LABEL}={CPU}"):  # kept: its tests failed
        rig.podman.run("rm", "-f", name)


def test_a_missing_image_is_one_line_saying_how_to_build_it(rig):
    proc = rig.run(*rig.args(NO_IMAGE))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: image localhost/feedstock-not-here:1 "), lines
    assert f"devtools/stand_in_image.py {NO_IMAGE}" in lines[0]
    assert not (rig.artifacts / f"{NO_IMAGE}-log.txt").exists()


def test_failed_configs_keep_their_containers_through_prune_and_the_enter_lines_work(rig):
    stray = "feedstock-test-stray"
    rig.podman.run("create", "--name", stray, "quay.io/condaforge/linux-anvil-x86_64:alma9", "true")
    proc = rig.run(*rig.args(FAILING, FAILING_TOO), "--prune")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "pruned:" in out, out
    kept = rig.podman.containers(LABEL)
    assert len([name for name in kept if "failing" in name]) == 2, kept
    assert stray not in rig.podman.run("ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert not (rig.artifacts / f"conda-forge-build-done-{FAILING}").exists()

    enter = line_after(out, "enter it:")
    assert enter.startswith("podman commit ") and " run -it --rm " in enter
    # inside: the failed config's own file, through the feedstock mount
    code, shown = in_a_terminal(enter, f"grep -c 3.99 /home/conda/feedstock_root/.ci_support/"
                                        f"{FAILING}.yaml | sed s/^/matches=/; exit 7\n", rig.env)
    assert code == 7 and "matches=1" in shown, shown[-2000:]
    remove = line_after(out, "remove it:")
    name = remove.split()[-1]
    assert subprocess.run(remove, shell=True, env=rig.env, capture_output=True).returncode == 0
    assert name not in rig.podman.containers(LABEL)
    rig.podman.run("rmi", f"{name}-debug", check=False)
    for other in rig.podman.containers(LABEL):
        rig.podman.run("rm", "-f", other, check=False)


def test_sigint_removes_the_running_container_and_writes_no_marker(rig):
    log = rig.artifacts / f"{INTERRUPTED}-log.txt"
    proc = subprocess.Popen([sys.executable, str(rig.root / "build-locally.py"), *rig.args(INTERRUPTED)],
                            cwd=rig.root, env=rig.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if log.exists() and "::build-locally-step:: build recipe" in log.read_text(errors="replace"):
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.5)
    assert rig.podman.containers(f"{LABEL}={INTERRUPTED}"), "the build's container is not running"
    time.sleep(3)  # rattler-build is at work inside
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out
    assert "interrupted" in out and "no done-marker written" in out, out
    assert rig.podman.containers(f"{LABEL}={INTERRUPTED}") == []
    assert not (rig.artifacts / f"conda-forge-build-done-{INTERRUPTED}").exists()


def test_an_engine_that_cannot_start_containers_says_what_to_check(rig, tmp_path):
    # podman's own defaults on this machine: ulimits it may not raise (no CAP_SYS_RESOURCE)
    conf = tmp_path / "containers.conf"
    conf.write_text('[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n'
                    '[containers]\ndefault_ulimits = ["nofile=1048576:1048576"]\n')
    env = dict(rig.env, CONTAINERS_CONF=str(conf))
    proc = subprocess.run([sys.executable, str(rig.root / "build-locally.py"), *rig.args(FAILING),
                           "--force"], cwd=rig.root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the engine could not start the container (exit 12" in proc.stdout, proc.stdout
    assert "podman run --rm quay.io/condaforge/linux-anvil-x86_64:alma9 true" in proc.stdout
    assert rig.podman.containers(f"{LABEL}={FAILING}") == []
