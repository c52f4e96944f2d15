"""localbuild/in_container/build_steps.sh (the in-container build) and `build-locally.py --native`, with a
fake `conda` on PATH: real bash, real files, the marker written only after every step."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.build_locally import (FAKE_CONDA, fake_conda_packages, install_fake_conda, make_feedstock,
                                         read_jsonl)
from localbuild.configs import host_platform
from localbuild.location.native import MIN_CONDA_BUILD_TEXT

CPU_MKL = "linux_64_blas_implmklcuda_compiler_versionNone"


@pytest.fixture
def fs(tmp_path):
    fs = make_feedstock(tmp_path, configs={CPU_MKL: dict(channels="conda-forge/label/rc,conda-forge")})
    install_fake_conda(fs.bin_dir)
    return fs


def run_steps(fs, config: str = CPU_MKL, **extra: str) -> subprocess.CompletedProcess:
    """build_steps.sh as the container runs it (FEEDSTOCK_ROOT pointing at the tree)."""
    env = fs.env(FEEDSTOCK_ROOT=str(fs.root), RECIPE_ROOT=str(fs.root / "recipe"), CONFIG=config,
                 CHANNEL_SOURCES="conda-forge/label/rc,conda-forge",
                 FAKE_CONDA_LOG=str(fs.root.parent / "conda-calls.jsonl"), **extra)
    env.pop("CONDA_BLD_PATH", None)
    return subprocess.run(["bash", str(fs.root / "localbuild" / "in_container" / "build_steps.sh")], env=env,
                          cwd=fs.root, capture_output=True, text=True, timeout=60)


def conda_calls(fs) -> list[dict]:
    return read_jsonl(fs.root.parent / "conda-calls.jsonl")


def test_build_steps_in_container_order_and_marker_last(fs):
    proc = run_steps(fs)
    assert proc.returncode == 0, proc.stderr
    calls = conda_calls(fs)
    commands = [c["argv"][0] + (" --help" if "--help" in c["argv"] else "") for c in calls]
    assert commands == ["install", "build", "index --help", "index"]
    install, build, _, index = calls
    channels = ["--override-channels", "--channel", "conda-forge/label/rc", "--channel", "conda-forge"]
    assert install["argv"][-len(channels) - 2:-2] == channels
    # the same minimum as the --native preflight: older conda-build rejects the recipe's glob pins
    assert install["argv"][-2:] == [f"conda-build>={MIN_CONDA_BUILD_TEXT}", "conda-index"]
    artifacts = str(fs.artifacts)
    assert build["argv"][:4] == ["build", str(fs.root / "recipe"), "-m",
                                 str(fs.root / ".ci_support" / f"{CPU_MKL}.yaml")]
    assert build["argv"][build["argv"].index("--croot") + 1] == artifacts
    assert build["argv"][build["argv"].index("--output-folder") + 1] == artifacts
    assert build["env"]["CONDA_PKGS_DIRS"] == f"{artifacts}/pkg_cache"   # cache on the host
    assert index["argv"] == ["index", artifacts]
    assert not any(c["marker_exists"] for c in calls)                    # marker comes last
    assert fs.marker(CPU_MKL).exists()
    assert (fs.artifacts / "linux-64" / "repodata.json").exists()
    steps = [line for line in proc.stdout.splitlines() if line.startswith("::build-locally-step::")]
    assert [s.split(":: ")[1] for s in steps] == ["configure conda", "install conda-build",
                                                  "build recipe", "index build_artifacts", "done"]


def test_build_steps_extra_options_are_split_but_not_globbed(fs):
    (fs.root / "pytorch-glob-bait").write_text("")        # a file a glob would pick up
    proc = run_steps(fs, EXTRA_CB_OPTIONS="  --no-test   --output-id pytorch-* ")
    assert proc.returncode == 0, proc.stderr
    build = next(c for c in conda_calls(fs) if c["argv"][0] == "build")
    assert build["argv"][-3:] == ["--no-test", "--output-id", "pytorch-*"]


def test_build_steps_failure_leaves_no_marker(fs):
    fs.artifacts.mkdir()
    fs.marker(CPU_MKL).write_text("")      # stale marker of an earlier build
    proc = run_steps(fs, FAKE_CONDA_BUILD_FAIL="1")
    assert proc.returncode == 1
    assert not fs.marker(CPU_MKL).exists()
    assert [c["argv"][0] for c in conda_calls(fs)] == ["install", "build"]   # no index


def test_build_steps_missing_config_file(fs):
    proc = run_steps(fs, CONFIG_FILE=str(fs.root / "nope.yaml"))
    assert proc.returncode == 2
    assert "config file" in proc.stderr and "not found" in proc.stderr
    assert conda_calls(fs) == []


def test_build_steps_upload_needs_token(fs):
    proc = run_steps(fs, UPLOAD_PACKAGES="True")
    assert proc.returncode == 3
    assert "no BINSTAR_TOKEN" in proc.stderr
    assert not fs.marker(CPU_MKL).exists()
    assert conda_calls(fs) == []          # refused before hours of building, not after


def _fake_anaconda(fs) -> Path:
    """An `anaconda` client that records its arguments and the token it was given."""
    calls = fs.root.parent / "anaconda-calls.txt"
    client = fs.bin_dir / "anaconda"
    client.write_text(f'#!/bin/sh\necho "$ANACONDA_API_TOKEN $*" >> "{calls}"\n')
    client.chmod(0o755)
    return calls


def test_build_steps_upload_without_client_stops_before_the_build(fs):
    proc = run_steps(fs, UPLOAD_PACKAGES="True", BINSTAR_TOKEN="tok",
                     PATH=f"{fs.bin_dir}:/usr/bin:/bin")
    assert proc.returncode == 3
    assert "uploading needs anaconda-client" in proc.stderr
    assert [c["argv"][0] for c in conda_calls(fs)] == ["install"]   # no build ran
    assert conda_calls(fs)[0]["argv"][-1] == "anaconda-client"      # it was asked for
    assert not fs.marker(CPU_MKL).exists()


def test_build_steps_upload_sends_the_built_packages(fs):
    calls = _fake_anaconda(fs)
    proc = run_steps(fs, UPLOAD_PACKAGES="True", BINSTAR_TOKEN="tok")
    assert proc.returncode == 0, proc.stderr
    artifacts = fs.artifacts
    libtorch, pytorch = fake_conda_packages(CPU_MKL)
    assert calls.read_text().splitlines() == [      # the packages, not conda-build's notes
        f"tok upload --skip-existing {artifacts}/linux-64/{libtorch} {artifacts}/linux-64/{pytorch}"]
    commands = [c["argv"][0] + (" --output" if "--output" in c["argv"] else "")
                for c in conda_calls(fs)]
    assert commands == ["install", "build", "build --output", "index", "index"]
    assert fs.marker(CPU_MKL).exists()


def native_env(fs, **extra):
    return fs.env(FAKE_CONDA_LOG=str(fs.root.parent / "conda-calls.jsonl"), **extra)


def test_native_build_through_build_steps(fs, tmp_path):
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    cache = tmp_path / "cc"
    proc = fs.run(CPU_MKL, "--native", "--python", "3.12", "--jobs", "2", "--ccache", str(cache),
                  "--min-free-gb", "0", env=native_env(fs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert fs.runs() == []                                  # no container engine involved
    calls = conda_calls(fs)
    assert [c["argv"][0] for c in calls] == ["build", "index", "index"]   # nothing installed
    build = calls[0]
    assert build["config_python"] == ["3.12.* *_cpython"]   # the derived config was used
    assert build["env"]["FEEDSTOCK_MAX_JOBS"] == "2"
    assert build["env"]["FEEDSTOCK_COMPILE_CACHE"] == str(cache)
    assert build["env"]["FEEDSTOCK_DEV_TAG"] == "py312"
    assert "CONDA_PKGS_DIRS" not in build["env"]           # the host's conda settings stay
    assert (fs.artifacts / f"conda-forge-build-done-{CPU_MKL}-devpy312").exists()
    assert "2 package(s)" in proc.stdout
    assert f"linux-64/{fake_conda_packages(CPU_MKL)[1]}" in proc.stdout
    derived = yaml.safe_load((fs.artifacts / "localbuild" / f"{CPU_MKL}-devpy312.yaml").read_text())
    assert derived["python"] == ["3.12.* *_cpython"]


def _conda_build_reporting(fs, text: str, status: int = 0) -> None:
    """A stand-in `conda-build` executable that only answers --version, as the real one does."""
    stand_in = fs.bin_dir / "conda-build"
    stand_in.write_text(f"#!/bin/sh\necho '{text}'\nexit {status}\n")
    stand_in.chmod(0o755)


@pytest.mark.parametrize("version", ["24.11.2", "25.1.2", "3.28.4"])
def test_native_refuses_a_conda_build_older_than_25_3(fs, version):
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    _conda_build_reporting(fs, f"conda-build {version}")
    proc = fs.run(CPU_MKL, "--native", "--min-free-gb", "0", env=native_env(fs))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert f"is conda-build {version}, but this recipe needs >= {MIN_CONDA_BUILD_TEXT}" in lines[0]
    assert f'conda install -n base "conda-build>={MIN_CONDA_BUILD_TEXT}"' in lines[0]
    assert str(fs.bin_dir / "conda-build") in lines[0]       # which one was found
    assert conda_calls(fs) == []                              # refused before anything ran
    assert not fs.artifacts.exists()


@pytest.mark.parametrize("version", ["25.3.0", "26.1.0"])
def test_native_accepts_conda_build_25_3_and_later(fs, version):
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    _conda_build_reporting(fs, f"conda-build {version}")
    proc = fs.run(CPU_MKL, "--native", "--min-free-gb", "0", env=native_env(fs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c["argv"][0] for c in conda_calls(fs)] == ["build", "index", "index"]
    assert fs.marker(CPU_MKL).exists()


def test_native_conda_build_without_a_readable_version_is_one_line(fs):
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    _conda_build_reporting(fs, "Traceback: ImportError: no module named conda", status=1)
    proc = fs.run(CPU_MKL, "--native", "--min-free-gb", "0", env=native_env(fs))
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: could not read the version of "), proc.stderr
    assert "ImportError" in lines[0] and f"conda-build >= {MIN_CONDA_BUILD_TEXT}" in lines[0]
    assert conda_calls(fs) == []


def test_native_failure_is_reported(fs):
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    proc = fs.run(CPU_MKL, "--native", "--min-free-gb", "0",
                  env=native_env(fs, FAKE_CONDA_BUILD_FAIL="1"))
    assert proc.returncode == 1
    assert "failed (exit 1)" in proc.stdout
    assert "compilation failed" in (fs.artifacts / f"{CPU_MKL}-log.txt").read_text()
    assert not fs.marker(CPU_MKL).exists()


def test_native_debug_runs_conda_debug(fs):
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    fs.artifacts.mkdir()
    fs.marker(CPU_MKL).write_text("")      # built before: debugging it runs anyway
    proc = fs.run(CPU_MKL, "--native", "--debug", "--output-id", "libtorch-*", "--min-free-gb", "0",
                  env=native_env(fs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (call,) = conda_calls(fs)
    assert call["argv"][0] == "debug" and call["argv"][-2:] == ["--output-id", "libtorch-*"]
    assert fs.marker(CPU_MKL).exists()                     # a debug session leaves it alone


def test_native_skips_configs_of_other_platforms(tmp_path):
    fs = make_feedstock(tmp_path, configs={"linux_ppc64le_x": dict(platform="linux-ppc64le"),
                                           CPU_MKL: {}})
    install_fake_conda(fs.bin_dir)
    proc = fs.run("--all", "--native", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "skipped:      needs a linux-ppc64le host" in proc.stdout
    if os.uname().machine != "ppc64le":
        assert proc.stdout.count("location:     native") == (1 if host_platform() == "linux-64" else 0)


def test_native_release_build_ignores_override_variables_from_the_shell(fs):
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    env = native_env(fs, FEEDSTOCK_DEV_TAG="stale", FEEDSTOCK_MAX_JOBS="99", CCACHE_DIR="/nowhere",
                     FEEDSTOCK_COMPILE_CACHE="redis://127.0.0.1:1", FEEDSTOCK_COMPILE_CACHE_PASSWORD="pw")
    proc = fs.run(CPU_MKL, "--native", "--min-free-gb", "0", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build = conda_calls(fs)[0]
    assert build["env"].get("FEEDSTOCK_DEV_TAG") is None
    assert build["env"].get("FEEDSTOCK_MAX_JOBS") is None and build["env"].get("CCACHE_DIR") is None
    assert build["env"].get("FEEDSTOCK_COMPILE_CACHE") is None
    assert build["env"].get("FEEDSTOCK_COMPILE_CACHE_PASSWORD") is None   # a secret: never unasked
    assert fs.marker(CPU_MKL).exists()


def _image_without_conda(fs, tmp_path):
    """A PATH like the ROCm image's: bash, coreutils and curl, but no conda."""
    (fs.bin_dir / "conda").unlink()
    (fs.bin_dir / "conda-build").unlink()
    installer = tmp_path / "Miniforge3-test.sh"
    # a stand-in installer: honours the real installer's `-b -p PREFIX` interface and puts a conda in PREFIX/bin
    installer.write_text('#!/bin/bash\nset -e\n[ "$1" = -b ] && [ "$2" = -p ]\nmkdir -p "$3/bin"\n'
                         f'printf \'#!/bin/sh\\nexec "{sys.executable}" -S "{FAKE_CONDA}" "$@"\\n\' > "$3/bin/conda"\n'
                         'chmod +x "$3/bin/conda"\n')
    return installer


def test_build_steps_bootstraps_conda_when_the_image_has_none(fs, tmp_path):
    installer = _image_without_conda(fs, tmp_path)
    proc = run_steps(fs, MINIFORGE_URL=installer.as_uri(), PATH=f"{fs.bin_dir}:/usr/bin:/bin")
    assert proc.returncode == 0, proc.stderr
    assert "::build-locally-step:: bootstrap conda (Miniforge)" in proc.stdout
    assert (fs.artifacts / "miniforge" / "bin" / "conda").is_file()
    assert not (fs.artifacts / "miniforge.partial").exists()
    assert [c["argv"][0] for c in conda_calls(fs)][:2] == ["install", "build"]
    assert fs.marker(CPU_MKL).exists()
    # a second build reuses the bootstrapped conda instead of downloading again
    fs.marker(CPU_MKL).unlink()
    proc = run_steps(fs, MINIFORGE_URL="file:///nonexistent/installer.sh", PATH=f"{fs.bin_dir}:/usr/bin:/bin")
    assert proc.returncode == 0, proc.stderr
    assert "bootstrap conda" not in proc.stdout


def test_build_steps_replaces_a_broken_bootstrap(fs, tmp_path):
    """A miniforge/ without bin/conda (an interrupted earlier bootstrap) is installed afresh,
    not moved into as a subfolder."""
    installer = _image_without_conda(fs, tmp_path)
    (fs.artifacts / "miniforge" / "pkgs").mkdir(parents=True)
    proc = run_steps(fs, MINIFORGE_URL=installer.as_uri(), PATH=f"{fs.bin_dir}:/usr/bin:/bin")
    assert proc.returncode == 0, proc.stderr
    assert (fs.artifacts / "miniforge" / "bin" / "conda").is_file()
    assert not (fs.artifacts / "miniforge" / "miniforge.partial").exists()
    assert fs.marker(CPU_MKL).exists()


def test_build_steps_unreachable_installer_is_one_clear_line(fs, tmp_path):
    _image_without_conda(fs, tmp_path)
    proc = run_steps(fs, MINIFORGE_URL="file:///nonexistent/installer.sh", PATH=f"{fs.bin_dir}:/usr/bin:/bin")
    assert proc.returncode == 3
    assert "could not download Miniforge" in proc.stderr and "MINIFORGE_URL" in proc.stderr
    assert not fs.marker(CPU_MKL).exists()
    assert not (fs.artifacts / "miniforge").exists()


@pytest.mark.parametrize("cuda, expected", [("None", None), ("12.9", "12.9"), ("13.0", "13.0")])
def test_build_steps_assume_the_configs_cuda_for_the_solver(tmp_path, cuda, expected):
    """CUDA outputs require __cuda; a driverless build machine gets CONDA_OVERRIDE_CUDA from
    the config's cuda_compiler_version, which build-locally.py reads with the one reader of
    config files (CONFIG_CUDA_VERSION; build_steps.sh no longer seds it out), CPU configs none."""
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    name = f"linux_64_blas_implmklcuda_compiler_version{cuda}"
    fs = make_feedstock(tmp_path, configs={name: dict(cuda=cuda)})
    install_fake_conda(fs.bin_dir)
    proc = fs.run(name, "--native", "--min-free-gb", "0", env=native_env(fs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build = next(c for c in conda_calls(fs) if c["argv"][0] == "build")
    assert build["env"].get("CONDA_OVERRIDE_CUDA") == expected
