"""common/driver.py: the one way the tools load the build driver of a feedstock."""
from __future__ import annotations

import shutil

import pytest

from common.driver import DriverMissing, driver_module
from tests.support.paths import REPO_ROOT


def test_each_feedstock_gets_its_own_driver(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(REPO_ROOT / "recipe" / "megabuild", copy / "recipe" / "megabuild")
    build_env = copy / "recipe" / "megabuild" / "build_env.py"
    build_env.write_text(build_env.read_text() + "\nMARK = 'the copy'\n")
    ours, theirs = driver_module(REPO_ROOT, "build_env"), driver_module(copy, "build_env")
    assert ours is not theirs and theirs.MARK == "the copy" and not hasattr(ours, "MARK")
    assert driver_module(REPO_ROOT, "build_env") is ours          # loaded once


def test_the_gpu_backend_is_the_drivers_one_decision():
    build_env = driver_module(REPO_ROOT, "build_env")
    assert build_env.gpu_backend({"cuda_compiler_version": "12.9"}) == "cuda"
    assert build_env.gpu_backend({"cuda_compiler_version": "None", "rocm_version": "7.2"}) == "rocm"
    for none in ("None", "none", "null", "~", "", "false"):
        assert build_env.gpu_backend({"cuda_compiler_version": none, "rocm_version": none}) == "cpu"
    assert build_env.gpu_backend({"gpu_backend": "CPU", "cuda_compiler_version": "12.9"}) == "cpu"


def test_a_tree_without_the_driver_is_one_error(tmp_path):
    with pytest.raises(DriverMissing, match="recipe/megabuild must be a Python package"):
        driver_module(tmp_path, "build_env")
