"""build-locally.py against a real Docker engine (the private one of tests/support/docker_daemon.py),
where the README's first command meets Docker before any build: the engine it picks by itself,
a DOCKER_HOST that points nowhere, and a daemon without the config's image (this machine
reaches no registry, as HPC compute nodes often do not). Each is one line, exit 3, and
nothing written. (Real builds in Docker are issue 26's next step.)"""
from __future__ import annotations

import os
from typing import Iterator

import pytest

from tests.support.build_locally import CPU_IMAGE, CUDA_IMAGE, make_feedstock
from tests.support.docker_daemon import DockerDaemon, docker_daemon_or_skip, docker_unavailable

pytestmark = [pytest.mark.container]

CPU = "linux_64_blas_implgenericcuda_compiler_versionNone"
CUDA = "linux_64_blas_implmklcuda_compiler_version12.9"


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Iterator[DockerDaemon]:
    with docker_daemon_or_skip(tmp_path_factory.mktemp("docker")) as running:
        yield running


def _real_docker_env(fs, docker_host: str) -> dict[str, str]:
    """The test feedstock's environment without its recording fake: the real `docker` client,
    talking to docker_host only."""
    env = fs.env()
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != str(fs.bin_dir))
    env.pop("DOCKER_EXECUTABLE", None)
    env["DOCKER_HOST"] = docker_host
    return env


def _one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, \
        proc.stdout + proc.stderr
    return lines[0]


def test_the_readmes_first_command_picks_docker_and_names_the_missing_image(engine, tmp_path):
    """Every missing image in one line, with the stand-in command for this engine (docker: the
    script's default is podman) and the tool the stand-in serves (it has no conda)."""
    fs = make_feedstock(tmp_path, configs={CPU: {}, CUDA: dict(cuda="12.9", image=CUDA_IMAGE)})
    proc = fs.run("--all", "--min-free-gb", "0", env=_real_docker_env(fs, engine.env["DOCKER_HOST"]))
    assert proc.returncode == 3
    line = _one_line(proc)
    assert f"2 images {CPU_IMAGE}, {CUDA_IMAGE} are not on this machine and cannot be pulled" in line
    assert (f"or build a stand-in offline: python3 devtools/stand_in_image.py {CPU} --engine docker; "
            f"python3 devtools/stand_in_image.py {CUDA} --engine docker, then build with --tool "
            "rattler-build (the stand-in has no conda)") in line
    assert not fs.artifacts.exists()
    assert engine.run("ps", "-aq").stdout.strip() == ""       # no container was made
    proc = fs.run(CPU, "--tool", "rattler-build", "--min-free-gb", "0",
                  env=_real_docker_env(fs, engine.env["DOCKER_HOST"]))
    line = _one_line(proc)
    assert line.startswith(f"error: image {CPU_IMAGE} is not on this machine") and "--tool" not in line


def test_a_docker_host_that_points_nowhere_is_one_line(tmp_path):
    if docker_unavailable():
        pytest.skip(docker_unavailable())
    fs = make_feedstock(tmp_path, configs={CPU: {}})
    proc = fs.run(CPU, "--min-free-gb", "0", env=_real_docker_env(fs, f"unix://{tmp_path}/nowhere.sock"))
    assert proc.returncode == 3
    line = _one_line(proc)
    assert line.startswith("error: docker engine not reachable (") and "--engine podman" in line
    assert not fs.artifacts.exists()
