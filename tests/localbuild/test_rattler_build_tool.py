"""`build-locally.py --tool rattler-build`: the container gets BUILD_TOOL and installs rattler-build,
--native runs rattler-build or py-rattler-build (localbuild/in_container/rattler_build_py.py), --dry-run shows the
tool's exact command, and a missing tool is one line (exit 3) before anything starts.

A real native build is not run here: it needs the local toolchain channel (minutes);
tests/realbuild/test_cpu_test_project.py builds recipe.yaml with py-rattler-build for real."""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.build_locally import REPO_ROOT, make_feedstock, option_values
from localbuild.configs import host_platform

CPU_MKL = "linux_64_blas_implmklcuda_compiler_versionNone"
CHANNELS = "conda-forge/label/rc,conda-forge"


@pytest.fixture
def fs(tmp_path):
    fs = make_feedstock(tmp_path, configs={CPU_MKL: dict(channels=CHANNELS)})
    shutil.copy2(REPO_ROOT / "recipe" / "recipe.yaml", fs.root / "recipe" / "recipe.yaml")
    return fs


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def native_only():
    if host_platform() != "linux-64":
        pytest.skip(f"the test config is linux-64; this host is {host_platform()}")
    if shutil.which("rattler-build"):
        pytest.skip("a rattler-build executable is on PATH; these tests need a host without one")


def python_with_rattler_build() -> str:
    proc = subprocess.run([sys.executable, "-c", "import rattler_build.cli_api"], capture_output=True)
    if proc.returncode != 0:
        pytest.skip("py-rattler-build (requirements-dev.txt) is not installed in this Python")
    return sys.executable


def python_without_site_packages(tmp_path: Path) -> Path:
    """This very interpreter, started without site-packages: a real Python lacking rattler_build."""
    wrapper = tmp_path / "bare-python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def expected_command(runner: list[str], recipe_root: str, feedstock: str) -> str:
    return shlex.join([*runner, "build", "--recipe", f"{recipe_root}/recipe.yaml", "-m",
                       f"{feedstock}/.ci_support/{CPU_MKL}.yaml", "--ignore-recipe-variants",
                       "--output-dir", f"{feedstock}/build_artifacts"])


def test_container_dry_run_shows_the_rattler_build_command(fs):
    proc = fs.run(CPU_MKL, "--tool", "rattler-build", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    command = expected_command(["rattler-build"], "/home/conda/recipe_root", "/home/conda/feedstock_root")
    assert f"build tool:   {command}\n" in proc.stdout
    assert "  BUILD_TOOL=rattler-build" in proc.stdout
    assert fs.calls() == [] and not fs.artifacts.exists()


def test_container_default_stays_conda_build(fs):
    proc = fs.run(CPU_MKL, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "build tool:" not in proc.stdout and "BUILD_TOOL" not in proc.stdout


def test_container_run_passes_build_tool_to_the_build_script(fs):
    proc = fs.run(CPU_MKL, "--tool", "rattler-build", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = fs.runs()
    assert "BUILD_TOOL=rattler-build" in option_values(run["argv"], "-e")
    assert run["argv"][-2:] == ["bash", "/home/conda/feedstock_root/localbuild/in_container/build_steps.sh"]


def test_rattler_build_does_not_combine_with_conda_build_only_modes(fs):
    for flag in ("--debug", "--upload"):
        proc = fs.run(CPU_MKL, "--tool", "rattler-build", flag, "--dry-run")
        assert proc.returncode == 2, proc.stderr
        assert "--tool rattler-build builds and tests only" in one_error_line(proc)


def test_unknown_tool_is_a_usage_error(fs):
    proc = fs.run(CPU_MKL, "--tool", "boa", "--dry-run")
    assert proc.returncode == 2 and "invalid choice: 'boa'" in proc.stderr


def test_native_dry_run_shows_the_py_rattler_build_command(fs):
    native_only()
    python = python_with_rattler_build()
    env = fs.env(RATTLER_BUILD_PYTHON=python)
    proc = fs.run(CPU_MKL, "--native", "--tool", "rattler-build", "--dry-run", env=env)
    assert proc.returncode == 0, proc.stderr
    runner = [python, str(fs.root / "localbuild" / "in_container" / "rattler_build_py.py")]
    command = expected_command(runner, str(fs.root / "recipe"), str(fs.root))
    assert f"build tool:   {command}\n" in proc.stdout
    for line in ("  BUILD_TOOL=rattler-build", f"  RATTLER_BUILD_PYTHON={python}", "  LOCALBUILD_NATIVE=1"):
        assert line in proc.stdout


def test_native_finds_the_feedstock_venv_without_the_variable(fs):
    native_only()
    venv_python = fs.root / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(python_with_rattler_build())
    proc = fs.run(CPU_MKL, "--native", "--tool", "rattler-build", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"build tool:   {shlex.quote(str(venv_python))} {fs.root}/localbuild/in_container/rattler_build_py.py build" in proc.stdout


@pytest.mark.parametrize("python", ["missing", "bare"])
def test_native_without_rattler_build_is_one_line_exit_3(fs, tmp_path, python):
    native_only()
    exe = tmp_path / "no-such-python" if python == "missing" else python_without_site_packages(tmp_path)
    proc = fs.run(CPU_MKL, "--native", "--tool", "rattler-build", "--min-free-gb", "0",
                  env=fs.env(RATTLER_BUILD_PYTHON=str(exe)))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    line = one_error_line(proc)
    assert "needs rattler-build on PATH or a Python with py-rattler-build" in line
    assert ("cannot run" if python == "missing" else "cannot import rattler_build") in line
    assert proc.stdout == "" and not fs.artifacts.exists()   # refused before anything started


def test_native_without_recipe_yaml_is_one_line_exit_3(fs):
    native_only()
    (fs.root / "recipe" / "recipe.yaml").unlink()
    proc = fs.run(CPU_MKL, "--native", "--tool", "rattler-build", "--min-free-gb", "0",
                  env=fs.env(RATTLER_BUILD_PYTHON=python_with_rattler_build()))
    assert proc.returncode == 3
    assert "needs recipe/recipe.yaml" in one_error_line(proc)


def test_build_steps_runs_py_rattler_build_and_a_failure_leaves_no_marker(fs):
    """build_steps.sh really starts py-rattler-build on the (stub-sourced) recipe; it fails fast
    (no such source), so the marker must not be written and the error is rattler-build's.
    The job file's channel_sources reach rattler-build (no -c as well: it refuses both)."""
    python = python_with_rattler_build()
    (fs.root / "recipe" / "recipe.yaml").write_text(
        "package:\n  name: broken\n  version: '1'\nsource:\n  path: ./does-not-exist\n"
        "build:\n  script: exit 0\n")
    channel = fs.root / "local-channel"   # offline: an empty local channel, not conda-forge
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}}')
    job = fs.root / ".ci_support" / f"{CPU_MKL}.yaml"
    job.write_text(job.read_text().replace(f"- {CHANNELS}\n", f"- {channel}\n"))
    env = fs.env(FEEDSTOCK_ROOT=str(fs.root), RECIPE_ROOT=str(fs.root / "recipe"), CONFIG=CPU_MKL,
                 CHANNEL_SOURCES=str(channel), LOCALBUILD_NATIVE="1",
                 BUILD_TOOL="rattler-build", RATTLER_BUILD_PYTHON=python)
    proc = subprocess.run(["bash", str(fs.root / "localbuild" / "in_container" / "build_steps.sh")], env=env, cwd=fs.root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "error: rattler-build failed" in proc.stderr and "does-not-exist" in proc.stderr
    assert not fs.marker(CPU_MKL).exists()


def test_py_driver_indexes_a_channel(tmp_path):
    python = python_with_rattler_build()
    channel = tmp_path / "channel"
    (channel / "linux-64").mkdir(parents=True)
    proc = subprocess.run([python, str(REPO_ROOT / "localbuild" / "in_container" / "rattler_build_py.py"), "index", str(channel)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((channel / "noarch" / "repodata.json").read_text())
    assert data["info"]["subdir"] == "noarch" and data["packages"] == {}


def test_native_build_of_a_small_recipe_end_to_end(fs):
    """build-locally.py --native --tool rattler-build really builds (py-rattler-build, offline:
    a recipe without requirements, an empty local channel), indexes and writes the marker."""
    native_only()
    python = python_with_rattler_build()
    channel = fs.root / "local-channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}}')
    job = fs.root / ".ci_support" / f"{CPU_MKL}.yaml"
    job.write_text(job.read_text().replace(f"- {CHANNELS}\n", f"- {channel}\n"))
    (fs.root / "recipe" / "recipe.yaml").write_text(
        "package:\n  name: hello-feedstock\n  version: '1.0'\n"
        "build:\n  number: 0\n  script:\n    - mkdir -p $PREFIX/share\n"
        "    - echo \"blas=${{ blas_impl }}\" > $PREFIX/share/hello.txt\n")
    proc = fs.run(CPU_MKL, "--native", "--tool", "rattler-build", "--min-free-gb", "0",
                  env=fs.env(RATTLER_BUILD_PYTHON=python), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [package] = fs.artifacts.glob("linux-64/hello-feedstock-1.0-*.conda")
    repodata = json.loads((fs.artifacts / "linux-64" / "repodata.json").read_text())
    assert package.name in repodata["packages.conda"]
    assert fs.marker(CPU_MKL).exists() and fs.runs() == []
