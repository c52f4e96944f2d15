"""build-locally.py on a ROCm config: the AMD devices for --gpu-tests (Docker and Podman) and
--rocm-arch development builds. The engine is the fake docker/podman that records its
arguments (tests/support/fake_docker); the device groups are read from real files."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.build_locally import CUDA_IMAGE, make_feedstock, option_values
from localbuild.engine import AMD_GROUP_NAMES, Engine, amd_device_groups, gpu_arguments

ROCM = "linux_64_blas_implgenericrocm_version7.2"
CUDA = "linux_64_blas_implmklcuda_compiler_version13.0"
ROCM_IMAGE = "rocm/dev-almalinux-8:7.2.1-complete"


@pytest.fixture
def fs(tmp_path: Path):
    return make_feedstock(tmp_path, configs={
        ROCM: dict(rocm="7.2", blas="generic", image=ROCM_IMAGE),
        CUDA: dict(cuda="13.0", image=CUDA_IMAGE)})


def expected_groups() -> list[str]:
    return amd_device_groups()  # this host's: numeric ids with an AMD GPU, names without


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_gpu_tests_pass_the_amd_devices(fs, engine: str) -> None:
    proc = fs.run(ROCM, "--gpu-tests", "--engine", engine, "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    assert option_values(run["argv"], "--device") == ["/dev/kfd", "/dev/dri"]
    groups = option_values(run["argv"], "--group-add")
    assert groups == (["keep-groups"] if engine == "podman" else expected_groups())
    assert "--gpus" not in run["argv"] and "--privileged" not in run["argv"]
    assert "FEEDSTOCK_ROCM_ARCH" not in run["container_env"]  # release build: full list
    assert "FEEDSTOCK_DEV_TAG" not in run["container_env"]


def test_no_gpu_tests_no_devices(fs) -> None:
    proc = fs.run(ROCM, "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    assert "--device" not in run["argv"] and "--group-add" not in run["argv"]


def test_device_groups_are_the_hosts_group_ids(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    (dev / "dri").mkdir(parents=True)
    for node in ("kfd", "dri/card0", "dri/renderD128"):
        (dev / node).write_text("")
    if os.geteuid() == 0:  # as on a real host: kfd and renderD* in "render", card0 in "video"
        for node, gid in (("kfd", 109), ("dri/renderD128", 109), ("dri/card0", 44)):
            os.chown(dev / node, -1, gid)
        assert amd_device_groups(dev) == ["44", "109"]
    else:
        assert amd_device_groups(dev) == [str(os.getgid())]
    docker = gpu_arguments(Engine("docker"), "rocm", dev)
    assert docker[:4] == ["--device", str(dev / "kfd"), "--device", str(dev / "dri")]
    assert option_values(docker, "--group-add") == amd_device_groups(dev)
    assert amd_device_groups(tmp_path / "no-gpu") == list(AMD_GROUP_NAMES)
    assert gpu_arguments(Engine("/usr/bin/podman"), "rocm", dev)[-2:] == ["--group-add",
                                                                          "keep-groups"]


def test_rocm_arch_is_a_dev_build(fs) -> None:
    proc = fs.run(ROCM, "--rocm-arch", "gfx90a,gfx942:xnack-", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    inside = run["container_env"]
    assert inside["FEEDSTOCK_ROCM_ARCH"] == "gfx90a;gfx942:xnack-"
    tag = inside["FEEDSTOCK_DEV_TAG"]
    assert tag.startswith("gfx90a") and all(c.isalnum() for c in tag)
    assert (fs.artifacts / f"conda-forge-build-done-{ROCM}-dev{tag}").exists()
    assert not fs.marker(ROCM).exists()  # a later release batch still builds the config
    assert (fs.artifacts / f"{ROCM}-dev{tag}-log.txt").exists()


def test_rocm_arch_reaches_rocm_configs_only(fs) -> None:
    proc = fs.run("--all", "--filter", "linux_64", "--rocm-arch", "gfx90a", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    envs = {run["config"]: run["container_env"] for run in fs.runs()}
    assert envs[ROCM]["FEEDSTOCK_ROCM_ARCH"] == "gfx90a"
    assert "FEEDSTOCK_ROCM_ARCH" not in envs[CUDA]


def test_bad_rocm_arch_is_one_line(fs) -> None:
    proc = fs.run(ROCM, "--rocm-arch", "gfx90a;mi300x", "--min-free-gb", "0")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "mi300x" in lines[0]
    assert fs.runs() == []


def test_dry_run_shows_the_devices(fs) -> None:
    proc = fs.run(ROCM, "--gpu-tests", "--dry-run", "--rocm-arch", "gfx90a")
    assert proc.returncode == 0, proc.stderr
    assert "--device /dev/kfd --device /dev/dri" in proc.stdout
    assert "FEEDSTOCK_ROCM_ARCH=gfx90a" in proc.stdout
    assert fs.runs() == []


def _one_error(proc) -> str:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


def test_a_rocm_arch_the_release_lacks_is_refused_before_anything_runs(fs) -> None:
    """Issue 25: --rocm-arch gfx9999 was accepted and failed only inside the container."""
    proc = fs.run(ROCM, "--rocm-arch", "gfx9999", "--min-free-gb", "0")
    assert proc.returncode == 2
    assert "unknown gfx target 'gfx9999' in --rocm-arch: not supported by ROCm 7.2" in _one_error(proc)
    assert fs.runs() == []


@pytest.mark.parametrize("config, args, words", [
    (CUDA, ["--rocm-arch", "gfx90a"], "--rocm-arch applies to ROCm configs, and none is selected"),
    (ROCM, ["--cuda-arch", "9.0"], "--cuda-arch applies to CUDA configs, and none is selected"),
    (ROCM, ["--native", "--engine", "podman"], "--engine podman and --native exclude each other"),
])
def test_options_that_would_be_ignored_are_refused(fs, config, args, words) -> None:
    proc = fs.run(config, *args, "--min-free-gb", "0")
    assert proc.returncode == 2
    assert words in _one_error(proc)
    assert fs.runs() == []


def test_an_arch_option_applies_when_one_selected_config_has_the_backend(fs) -> None:
    proc = fs.run(ROCM, CUDA, "--rocm-arch", "gfx90a", "--dry-run")
    assert proc.returncode == 0, proc.stderr
