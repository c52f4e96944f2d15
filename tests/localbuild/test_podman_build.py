"""build-locally.py in a real container engine: podman with this machine's private configuration,
the stand-in build image from devtools/stand_in_image.py, the feedstock's recipe.yaml building
the PyTorch-shaped test project with rattler-build against the local toolchain channel (given
with --channel; the config itself keeps conda-forge as its channel_sources).

One real build per session, run on behalf of a non-root user (SUDO_UID, as under sudo); the
other tests use configs that fail early or are interrupted, so the module stays in minutes.
"""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from localbuild.engine import LABEL
from tests.support.paths import RECIPE_VERSION
from tests.support.podman import (CPU, FAILING, PYTHON, Podman,
                                  build_stand_in_image, config_texts, podman_feedstock,
                                  podman_unavailable, private_podman)
from tests.support.scratch import module_scratch
from tests.support.engine_checks import (a_container_left_running_holds_the_folder,
                                         a_killed_or_hung_up_run_leaves_no_container,
                                         a_missing_image_is_one_line,
                                         failed_configs_keep_their_containers_through_prune,
                                         sigint_removes_the_running_container,
                                         the_build_landed_for_the_user)

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.container, pytest.mark.image, pytest.mark.download]

ON_BEHALF_OF = 4321      # SUDO_UID: the user a root run builds for
IMAGE = "quay.io/condaforge/linux-anvil-x86_64:alma9"


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

    @property
    def engine(self) -> Podman:
        return self.podman


@pytest.fixture(scope="module")
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, realbuild_toolchain: dict,
        cpythons: dict[str, Path]) -> Iterator[Rig]:
    reason = podman_unavailable()
    if reason:
        pytest.skip(reason)
    from tests.realbuild.feedstock_build import prepare_project_source

    work = module_scratch(request, tmp_path_factory, "podman")
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
    podman.remove_own()


def test_the_build_lands_in_build_artifacts_owned_by_the_user(rig):
    out = rig.first.stdout + rig.first.stderr
    assert rig.first.returncode == 0, out[-3000:]
    the_build_landed_for_the_user(rig, "podman", ON_BEHALF_OF)
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
    a_missing_image_is_one_line(rig)


def test_failed_configs_keep_their_containers_through_prune_and_the_enter_lines_work(rig):
    failed_configs_keep_their_containers_through_prune(rig, "podman", IMAGE)


def test_sigint_removes_the_running_container_and_writes_no_marker(rig):
    sigint_removes_the_running_container(rig)


@pytest.mark.parametrize("how", ["kill -9", "SIGHUP"])
def test_a_killed_or_hung_up_run_leaves_no_container(rig, how):
    took = a_killed_or_hung_up_run_leaves_no_container(rig, how)
    print(f"podman: container gone {took:.1f} s after {how} of build-locally")


def test_a_container_left_running_by_a_killed_run_holds_the_folder(rig):
    a_container_left_running_holds_the_folder(rig)


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


def test_develop_in_the_container_builds_a_checkout_and_an_edit_recompiles_one_object(rig, tmp_path):
    """--develop in the config's image: the environment made there by py-rattler from the
    channel, the checkout and the develop folder mounted at the host's paths; the installed
    torch runs on the host too (the image's Python is the host's, at the same path)."""
    from tests.support.develop_checkout import (EDITED, changed_paths, develop_checkout, edit_core_file,
                                                recompiled_counts, tree_state)

    checkout = develop_checkout(tmp_path / "checkout")
    before = tree_state(checkout)
    args = [CPU, "--engine", "podman", "--develop", str(checkout), "--channel", str(rig.channel),
            "--min-free-gb", "2"]
    first = rig.run(*args)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-4000:]
    assert "environment: making" in out and "location:" not in out, out[-3000:]
    count, total = recompiled_counts(out)
    assert count == total > 5
    folder = rig.artifacts / "develop" / f"{CPU}-{PYTHON}"

    def installed_value() -> float:   # torch._C.self_test() of the installed torch, run on the host
        proc = subprocess.run([str(folder / "env" / "bin" / "python"), "-c", "import torch; print(torch._C.self_test())"],
                              capture_output=True, text=True, timeout=120, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(folder / "env" / "lib")})
        assert proc.returncode == 0, proc.stderr
        return float(proc.stdout)

    before_edit = installed_value()
    edit_core_file(checkout)
    again = rig.run(*args)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert "is current" in out and recompiled_counts(out) == (1, total), out[-3000:]
    assert installed_value() == pytest.approx(before_edit + 1000.0)   # the edit, installed
    assert changed_paths(before, tree_state(checkout)) == [EDITED]
    assert rig.podman.containers(f"{LABEL}={CPU}") == []
