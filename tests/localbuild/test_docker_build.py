"""The README's first command in a real Docker engine (the private one of
tests/support/docker_daemon.py): build-locally picks docker by itself (no --engine), builds the
test-project config with the stand-in image imported by `devtools/stand_in_image.py --engine
docker`, and behaves as it does in podman where Docker differs: files the root daemon writes
through bind mounts, the user-id hand-back, signals to `docker run`, `docker system prune`
between builds, and a daemon that dies mid-batch.

One real build: the first batch builds the cpu config, then its daemon is killed while the
second config builds; it is started again for the other tests, which use configs that fail
early or are interrupted. The toolchain channel and the stand-in rootfs are the session's.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from localbuild.engine import LABEL
from tests.support.build_locally import summary_rows
from tests.support.docker_daemon import DockerDaemon, docker_daemon_or_skip
from tests.support.paths import RECIPE_VERSION
from tests.support.podman import (CPU, PYTHON,
                                  build_stand_in_image, config_texts, podman_feedstock,
                                  podman_unavailable)
from tests.support.engine_checks import (a_missing_image_is_one_line,
                                         failed_configs_keep_their_containers_through_prune,
                                         sigint_removes_the_running_container,
                                         not_owned_by, the_build_landed_for_the_user)

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.container, pytest.mark.image, pytest.mark.download]

ON_BEHALF_OF = 4321                  # SUDO_UID: the user a root run builds for
ENGINE_LOST = "linux_64_engine_lost"  # the cpu config again: its daemon dies while it builds
IMAGE = "quay.io/condaforge/linux-anvil-x86_64:alma9"


@dataclass
class Batch:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Rig:
    root: Path
    docker: DockerDaemon
    channel: Path
    env: dict[str, str]
    first: Batch | None = None
    build_seconds: float = 0.0
    image_seconds: float = 0.0

    def args(self, *configs: str) -> list[str]:
        # no --engine: docker is the one build-locally picks where a docker client is on PATH
        return [*configs, "--tool", "rattler-build", "--channel", str(self.channel),
                "--skip-tests", "--jobs", "2", "--min-free-gb", "2"]

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(self.root / "build-locally.py"), *args],
                                cwd=self.root, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(self.root / "build-locally.py"), *args],
                              cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    @property
    def artifacts(self) -> Path:
        return self.root / "build_artifacts"

    @property
    def engine(self) -> DockerDaemon:
        return self.docker


def _batch_losing_its_daemon(rig: Rig) -> Batch:
    """CPU then ENGINE_LOST; dockerd is killed once ENGINE_LOST's container is at work."""
    proc = rig.popen(*rig.args(CPU, ENGINE_LOST))
    lines: list[str] = []
    errors: list[str] = []
    readers = [threading.Thread(target=lambda: lines.extend(proc.stdout)),
               threading.Thread(target=lambda: errors.extend(proc.stderr))]
    for reader in readers:
        reader.start()
    marker = f"{ENGINE_LOST}] step: build recipe"
    deadline = time.monotonic() + 1800
    while not any(marker in line for line in lines) and proc.poll() is None:
        assert time.monotonic() < deadline, "".join(lines)[-3000:]
        time.sleep(0.5)
    if proc.poll() is None:
        time.sleep(3)  # rattler-build is at work inside
        rig.docker.kill_dockerd()
    try:
        proc.wait(timeout=600)
    finally:
        for reader in readers:
            reader.join(timeout=60)
    return Batch(proc.returncode, "".join(lines), "".join(errors))


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, realbuild_toolchain: dict,
        cpythons: dict[str, Path]) -> Iterator[Rig]:
    reason = podman_unavailable()   # mmdebstrap makes the stand-in image's rootfs
    if reason:
        pytest.skip(reason)
    from tests.realbuild.feedstock_build import prepare_project_source

    work = tmp_path_factory.mktemp("docker-build")
    with docker_daemon_or_skip(work / "docker") as docker:
        texts = config_texts(realbuild_toolchain["versions"], work)
        texts[ENGINE_LOST] = texts[CPU]
        root = podman_feedstock(work / "feedstock", prepare_project_source(work / "source"), texts)
        started = time.monotonic()
        build_stand_in_image(docker, root, CPU, [cpythons[PYTHON]], engine_name="docker")
        env = dict(docker.env, SUDO_UID=str(ON_BEHALF_OF), CPU_COUNT="2")
        rig = Rig(root, docker, realbuild_toolchain["toolchain"].channel, env,
                  image_seconds=time.monotonic() - started)
        started = time.monotonic()
        try:
            rig.first = _batch_losing_its_daemon(rig)
        finally:
            rig.build_seconds = time.monotonic() - started
            if rig.docker.procs[-1].args[0] != "dockerd":
                docker.start_dockerd()  # back, with its images, for the other tests
        for name in docker.containers(LABEL):   # the lost build's, which the daemon stopped
            docker.run("rm", "-f", name, check=False)
        yield rig


def test_the_build_lands_in_build_artifacts_owned_by_the_user(rig):
    out = rig.first.stdout + rig.first.stderr
    assert f"[1/2 {CPU}] ok " in rig.first.stdout, out[-3000:]
    # docker picked by itself: the README's first command names no engine. The work folder of
    # the build whose daemon died is root's until the next run hands it back (below).
    the_build_landed_for_the_user(rig, "docker", ON_BEHALF_OF, besides="bld")
    print(f"docker batch: {rig.build_seconds:.0f}s (stand-in image import {rig.image_seconds:.0f}s)")


def test_a_daemon_that_dies_mid_batch_is_one_line_after_a_summary_of_what_was_built(rig):
    first = rig.first
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr
    errors = first.stderr.strip().splitlines()
    assert len(errors) == 1 and "Traceback" not in first.stderr, first.stderr
    assert errors[0].startswith(f"error: the docker engine stopped answering during {ENGINE_LOST} ("), errors
    assert "run the same command again" in errors[0]
    rows = summary_rows(first.stdout)
    assert rows[CPU][0] == "ok" and int(rows[CPU][2]) >= 3, rows
    assert rows[ENGINE_LOST][0] == "failed (the docker engine stopped answering)", rows
    assert f"docker rm -f build-locally-{ENGINE_LOST}" in first.stdout
    assert not (rig.artifacts / f"conda-forge-build-done-{ENGINE_LOST}").exists()


def test_the_container_is_removed_after_success(rig):
    assert rig.docker.containers(f"{LABEL}={CPU}") == []


def test_a_second_run_skips_the_done_config_and_hands_back_what_the_lost_build_left(rig):
    proc = rig.run(*rig.args(CPU))
    assert proc.returncode == 0, proc.stderr
    assert "already built" in proc.stdout and "start:" not in proc.stdout, proc.stdout
    # the lost build's container wrote on as root after that run's hand-back; this run's takes it
    assert not_owned_by(rig.artifacts, ON_BEHALF_OF) == []


def test_a_missing_image_is_one_line_saying_how_to_build_it(rig):
    a_missing_image_is_one_line(rig)


def test_prune_keeps_failed_containers_and_the_image_and_the_enter_lines_work(rig):
    failed_configs_keep_their_containers_through_prune(rig, "docker", IMAGE)


def test_sigint_removes_the_running_container_and_writes_no_marker(rig):
    sigint_removes_the_running_container(rig)


@pytest.fixture
def small_artifacts(rig: Rig, tmp_path: Path) -> Iterator[Path]:
    """A copy of the feedstock tree whose build_artifacts/ is a tmpfs too small for the build."""
    if os.getuid() != 0:
        pytest.skip("a tmpfs build_artifacts/ is mounted by root (CI runs as root)")
    root = tmp_path / "feedstock"
    shutil.copytree(rig.root, root, ignore=shutil.ignore_patterns("build_artifacts"), symlinks=True)
    artifacts = root / "build_artifacts"
    artifacts.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(artifacts)],
                   check=True, capture_output=True, timeout=60)
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(artifacts)], capture_output=True, timeout=60)


TMPFS_SIZE = "24m"


def test_a_full_disk_fails_the_build_with_the_reason_and_leaves_nothing_half_written(rig, small_artifacts):
    # --min-free-gb 0: past the preflight, which would refuse the small disk before the build
    proc = subprocess.run([sys.executable, str(small_artifacts / "build-locally.py"), *rig.args(CPU),
                           "--min-free-gb", "0"],
                          cwd=small_artifacts, env=rig.env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out[-3000:]
    result = summary_rows(proc.stdout)[CPU][0]
    assert result.startswith("failed (build_artifacts/ ran out of disk space ("), result
    artifacts = small_artifacts / "build_artifacts"
    assert not (artifacts / f"conda-forge-build-done-{CPU}").exists()
    # what is there is whole: every package a zip that reads, any index JSON that parses
    for package in artifacts.rglob("*.conda"):
        with zipfile.ZipFile(package) as archive:
            assert archive.testzip() is None, package
    for index in artifacts.rglob("repodata.json"):
        json.loads(index.read_text())
    assert rig.docker.containers(f"{LABEL}={CPU}"), "the failed build's container is kept"
    for name in rig.docker.containers(f"{LABEL}={CPU}"):
        rig.docker.run("rm", "-f", name, check=False)


def test_an_unreachable_source_is_named_and_a_tarball_fetched_elsewhere_builds(rig, tmp_path):
    """The recipe's source as a url the container cannot reach (HPC compute nodes are often
    offline): the failure names the url and the sha256; --source-tarball builds without network."""
    from tests.realbuild.feedstock_build import replace_source

    root = tmp_path / "feedstock"
    shutil.copytree(rig.root, root, ignore=shutil.ignore_patterns("build_artifacts"), symlinks=True)
    source = root / "recipe" / "test_project"
    tarball = tmp_path / "elsewhere" / "test_project-1.0.tar.gz"
    tarball.parent.mkdir()
    with tarfile.open(tarball, "w:gz", compresslevel=1) as tar:
        tar.add(source, arcname="test_project-1.0")
    shutil.rmtree(source)          # the url is the only way to the source now
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    url = "http://127.0.0.1:9/test_project-1.0.tar.gz"
    recipe = root / "recipe" / "recipe.yaml"
    recipe.write_text(replace_source(recipe.read_text(), f"  url: {url}\n  sha256: {digest}\n"))

    def build(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(root / "build-locally.py"), *rig.args(CPU), *extra],
                              cwd=root, env=rig.env, capture_output=True, text=True, timeout=900)

    offline = build()
    assert offline.returncode == 1, offline.stdout[-3000:] + offline.stderr
    row = summary_rows(offline.stdout)[CPU][0]
    assert f"source {url} (sha256 {digest}) could not be downloaded" in row, row
    assert "--source-tarball FILE" in row
    for name in rig.docker.containers(f"{LABEL}={CPU}"):   # the failed build's, kept
        rig.docker.run("rm", "-f", name, check=False)

    built = build("--source-tarball", str(tarball))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr
    names = [p.name for p in (root / "build_artifacts" / "linux-64").glob("*.conda")]
    assert any(n.startswith(f"pytorch-{RECIPE_VERSION}-cpu_generic_py312_h") for n in names), names
    assert (root / "build_artifacts" / f"conda-forge-build-done-{CPU}").is_file()
    assert rig.docker.containers(f"{LABEL}={CPU}") == []
