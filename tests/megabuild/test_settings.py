"""The settings line: every driver step starts with each setting it acts on, its value and its
source, so a developer setting the build did not receive is seen in the log's first line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from megabuild.context import BuildContext
from megabuild.overrides import OVERRIDE_VARIABLES
from megabuild.settings import redact, settings_line

PASSWORD = "hunter2-never-printed"
CPU = {"PKG_NAME": "libtorch-split", "cuda_compiler_version": "None", "blas_impl": "generic",
       "target_platform": "linux-64", "CPU_COUNT": "4"}
CUDA = {**CPU, "gpu_backend": "cuda", "cuda_compiler_version": "12.9"}
ROCM = {**CPU, "gpu_backend": "rocm", "rocm_version": "7.2"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A source tree (setup.py form), a ccache on PATH (never run here) and a ROCm install."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "setup.py").write_text("")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ccache").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "bin" / "ccache").chmod(0o755)
    (tmp_path / "rocm" / "include" / "hip").mkdir(parents=True)
    (tmp_path / "rocm" / "include" / "hip" / "hip_runtime.h").write_text("#pragma once\n")
    (tmp_path / "rocm" / "llvm" / "bin").mkdir(parents=True)
    (tmp_path / "rocm" / "llvm" / "bin" / "clang++").write_text("")
    return tmp_path


def environ(tree: Path, variant: dict, **overrides: str) -> dict[str, str]:
    return {"PATH": f"{tree / 'bin'}:/usr/bin:/bin", "SRC_DIR": str(tree / "src"),
            "PREFIX": str(tree / "prefix"), "PYTHON": sys.executable, "ROCM_PATH": str(tree / "rocm"),
            **variant, **overrides}


def line_for(env: dict[str, str]) -> str:
    return settings_line(BuildContext.from_environ(env), env)


def test_nothing_set_says_default_for_every_setting(tree: Path) -> None:
    line = line_for(environ(tree, CUDA))
    assert line.startswith("settings: jobs ")
    for part in ("heavy jobs ", "cuda archs 5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX (default)",
                 "dev tag none (default)", "compile cache none (default)",
                 "compile cache read-only no (default)", "compile cache password not set (default)",
                 "front end setup.py (default)"):
        assert part in line, line
    assert line.count("(default)") == 8 and "FEEDSTOCK" not in line, line
    assert "rocm archs" not in line  # nothing to say about another backend's list when unset


def test_every_override_variable_is_named_as_the_source_of_its_value(tree: Path) -> None:
    """Each variable of megabuild/overrides.py that is set shows up as a source, with the value
    the build uses; the password only as `set`."""
    frontend = tree / "frontend.py"
    frontend.write_text("from megabuild.frontend import SetupPyFrontend\n"
                        "def frontend():\n    return SetupPyFrontend()\n")
    values = {"FEEDSTOCK_MAX_JOBS": "3", "FEEDSTOCK_HEAVY_JOBS": "1",
              "FEEDSTOCK_CUDA_ARCH_LIST": "9.0a;10.0f;12.0f+PTX", "FEEDSTOCK_ROCM_ARCH": "gfx90a",
              "FEEDSTOCK_DEV_TAG": "mine", "FEEDSTOCK_COMPILE_CACHE": str(tree / "cache"),
              "FEEDSTOCK_COMPILE_CACHE_READ_ONLY": "1", "CCACHE_DIR": str(tree / "old-cache"),
              "FEEDSTOCK_COMPILE_CACHE_PASSWORD": PASSWORD, "MEGABUILD_FRONTEND": str(frontend)}
    assert set(values) == set(OVERRIDE_VARIABLES), "a new override needs its place in the line"
    line = line_for(environ(tree, CUDA, **values))
    expected = ["jobs 3 (FEEDSTOCK_MAX_JOBS)", "heavy jobs 1 (FEEDSTOCK_HEAVY_JOBS)",
                "cuda archs 9.0a;10.0f;12.0f+PTX (FEEDSTOCK_CUDA_ARCH_LIST)",
                "rocm archs gfx90a (FEEDSTOCK_ROCM_ARCH, ignored: a cuda build)",
                "dev tag mine (FEEDSTOCK_DEV_TAG)",
                f"compile cache {tree / 'cache'} (FEEDSTOCK_COMPILE_CACHE)",
                f"ccache dir {tree / 'old-cache'} (CCACHE_DIR, ignored: FEEDSTOCK_COMPILE_CACHE wins)",
                "compile cache read-only yes (FEEDSTOCK_COMPILE_CACHE_READ_ONLY)",
                "compile cache password set (FEEDSTOCK_COMPILE_CACHE_PASSWORD)",
                f"front end {frontend} (MEGABUILD_FRONTEND)"]
    assert line == "settings: " + ", ".join(expected)
    assert PASSWORD not in line


def test_the_older_ccache_dir_spelling_is_its_own_source(tree: Path) -> None:
    line = line_for(environ(tree, CPU, CCACHE_DIR=str(tree / "old-cache")))
    assert f"compile cache {tree / 'old-cache'} (CCACHE_DIR)" in line and "ccache dir" not in line


def test_rocm_arch_list_on_a_rocm_build(tree: Path) -> None:
    assert "rocm archs gfx90a;gfx942 (FEEDSTOCK_ROCM_ARCH)" in line_for(
        environ(tree, ROCM, FEEDSTOCK_ROCM_ARCH="gfx90a;gfx942"))
    assert "rocm archs gfx" in line_for(environ(tree, ROCM)) and "(FEEDSTOCK_ROCM_ARCH" not in \
        line_for(environ(tree, ROCM))


def test_the_heavy_pool_shows_the_size_used_when_the_override_is_capped(tree: Path) -> None:
    line = line_for(environ(tree, CPU, FEEDSTOCK_MAX_JOBS="2", FEEDSTOCK_HEAVY_JOBS="9"))
    assert "jobs 2 (FEEDSTOCK_MAX_JOBS), heavy jobs 2 (FEEDSTOCK_HEAVY_JOBS=9, at most jobs)" in line


def test_the_front_end_the_tree_declares(tree: Path) -> None:
    (tree / "src" / "pyproject.toml").write_text('[build-system]\nbuild-backend = "scikit_build_core.build"\n')
    assert "front end scikit-build-core (default)" in line_for(environ(tree, CPU))


def test_redact_keeps_no_credentials() -> None:
    assert redact("http://user:secret@cache.example:8080/ccache?token=abc&x=1") == \
        "http://***@cache.example:8080/ccache?token=***&x=***"
    assert redact("redis://cache.example:6379/2") == "redis://cache.example:6379/2"
    assert redact("/shared/ccache") == "/shared/ccache"


def test_the_settings_line_is_each_steps_first_line(tree: Path, repo_root: Path) -> None:
    """Through `python -m megabuild`: the line comes first, then the warning about the remote
    cache that does not answer (logged while the settings were worked out), then the step; the
    password appears nowhere."""
    env = environ(tree, {**CPU, "PKG_NAME": "no-such-step"}, PYTHONPATH=str(repo_root / "recipe"),
                  FEEDSTOCK_COMPILE_CACHE="redis://127.0.0.1:1/0",
                  FEEDSTOCK_COMPILE_CACHE_PASSWORD=PASSWORD, FEEDSTOCK_MAX_JOBS="2")
    proc = subprocess.run([sys.executable, "-m", "megabuild"], env=env, capture_output=True, text=True,
                          cwd=tree, timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("[megabuild] settings: jobs 2 (FEEDSTOCK_MAX_JOBS), "), proc.stderr
    assert "compile cache off (FEEDSTOCK_COMPILE_CACHE=redis://127.0.0.1:1/0 unusable, see the " \
           "warning below)" in lines[0]
    assert lines[1].startswith("[megabuild] warning: compile cache redis://127.0.0.1:1/0 is not reachable")
    assert lines[2] == "[megabuild] ==> no-such-step (megabuild driver)"
    assert lines[-1].startswith("error: PKG_NAME='no-such-step' has no megabuild step")
    assert PASSWORD not in proc.stdout + proc.stderr


def test_bad_input_stops_before_the_line_with_one_error(tree: Path, repo_root: Path) -> None:
    env = environ(tree, CPU, PYTHONPATH=str(repo_root / "recipe"), FEEDSTOCK_MAX_JOBS="lots")
    proc = subprocess.run([sys.executable, "-m", "megabuild"], env=env, capture_output=True, text=True,
                          cwd=tree, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == ["error: FEEDSTOCK_MAX_JOBS='lots' is not a positive whole "
                                        "number; set it to the number of parallel compile jobs, e.g. 4"]
    assert not os.path.exists(tree / "src" / "megabuild-tmp")


def test_the_driver_folders_are_named_only_when_set(tree: Path) -> None:
    """The develop step puts the build folder and the stage outside the checkout."""
    assert "dir" not in line_for(environ(tree, CPU)).replace("ccache dir", "")
    line = line_for(environ(tree, CPU, MEGABUILD_STAGE_DIR=str(tree / "stage"),
                            MEGABUILD_BUILD_DIR=str(tree / "build")))
    assert line.endswith(f"stage dir {tree / 'stage'} (MEGABUILD_STAGE_DIR), "
                         f"build dir {tree / 'build'} (MEGABUILD_BUILD_DIR)")
