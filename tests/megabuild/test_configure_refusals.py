"""The pieces of the refusals after CMake's configure that need no build: which CMake versions
a scikit-build-core project accepts, the `cmake.define` entries a message names, the split's
checks on a cache, the linalg flavour records, and scikit-build-core's configure-only entry
(probed in this environment's real scikit-build-core, and in one that lacks it). The refusals
on real builds, each with its count of compiled objects, are in test_cmake_versions.py and
test_split_build.py."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from megabuild import linalg_flavour
from megabuild.cmake_choice import project_spec, satisfies
from megabuild.configure_checks import check_configured, check_flipped, flipped_switches
from megabuild.errors import MegabuildError
from megabuild.pyproject import cmake_version, defines_reading
from megabuild.scikit_build import CONFIGURE_SCRIPT
from tests.support.paths import REPO_ROOT

PROJECT = REPO_ROOT / "tests" / "support" / "megabuild_project"
RECORD = ("_Python_INTERPRETER_PROPERTIES:INTERNAL=Python;3;12;1;64;;cpython-312-x86_64-linux-gnu;"
          "abi3;/p/lib/python3.12;/p/lib/python3.12;/p/lib/python3.12/site-packages;"
          "/p/lib/python3.12/site-packages\n_Python_INCLUDE_DIR:INTERNAL=/p/include/python3.12\n")


@pytest.mark.parametrize("release, spec, accepted", [
    ((3, 27, 9), ">=3.27", True), ((3, 26, 4), ">=3.27", False), ((4, 4, 5), ">=3.27,<5", True),
    ((5, 0, 0), ">=3.27,<5", False), ((3, 31, 2), "==3.31.*", True), ((3, 30, 1), "~=3.30", True),
    ((4, 0, 0), "~=3.30", False), ((3, 31, 0), "~=3.30.1", False), ((4, 0, 0), "!=4.0.0", False),
])
def test_cmake_version_requirements(release, spec, accepted) -> None:
    assert satisfies(release, spec) is accepted


def test_an_unreadable_requirement_is_one_line() -> None:
    with pytest.raises(MegabuildError, match=r"cannot read the CMake version requirement 'cmake 3'"):
        satisfies((3, 30), "cmake 3")


def test_what_the_project_accepts(tmp_path: Path) -> None:
    assert cmake_version(PROJECT) is None  # the setup.py form's pyproject.toml
    assert project_spec(PROJECT) == ">=3.27"  # cmake_minimum_required, scikit-build-core's default
    (tmp_path / "pyproject.toml").write_text('[tool.scikit-build.cmake]\nversion = ">=3.29,<4"\n')
    assert project_spec(tmp_path) == ">=3.29,<4"
    (tmp_path / "pyproject.toml").write_text('[tool.scikit-build]\ncmake.version = "CMakeLists.txt"\n')
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.28...3.31)\n")
    assert project_spec(tmp_path) == ">=3.28"
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")
    assert project_spec(tmp_path) == ">=3.15"


def test_the_define_entries_that_read_a_variable(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.scikit-build.cmake.define]\nMY_MAGMA = {env = "USE_MAGMA"}\nUSE_CUDA = {env = "USE_CUDA"}\n'
        'OTHER = "ON"\n')
    assert defines_reading(tmp_path, "USE_MAGMA") == ['MY_MAGMA = {env = "USE_MAGMA"}']
    assert defines_reading(tmp_path, "USE_ROCM") == []


def cache_with(tmp_path: Path, *lines: str, record: bool = True) -> Path:
    path = tmp_path / "CMakeCache.txt"
    path.write_text("# This is the CMakeCache file.\n" + (RECORD if record else "") + "".join(f"{l}\n" for l in lines))
    return path


def test_the_checks_after_configure(tmp_path: Path) -> None:
    assert flipped_switches("cuda", {"USE_MAGMA": "0"}) == {"USE_MAGMA": "0"}
    assert flipped_switches("cpu", {"USE_MAGMA": "0"}) == {}
    check_configured(cache_with(tmp_path, "USE_MAGMA:BOOL=OFF"), tmp_path, {"USE_MAGMA": "0"})
    with pytest.raises(MegabuildError, match=r"USE_MAGMA is not in the cache .* add USE_MAGMA = "):
        check_configured(cache_with(tmp_path), tmp_path, {"USE_MAGMA": "0"})
    with pytest.raises(MegabuildError, match=r"USE_MAGMA is ON after CMake's configure, though the driver set USE_MAGMA=0"):
        check_configured(cache_with(tmp_path, "USE_MAGMA:BOOL=ON"), tmp_path, {"USE_MAGMA": "0"})
    with pytest.raises(MegabuildError, match=r"has no _Python_INTERPRETER_PROPERTIES"):
        check_configured(cache_with(tmp_path, "USE_MAGMA:BOOL=OFF", record=False), tmp_path, {})
    check_flipped(cache_with(tmp_path, "USE_MAGMA:BOOL=ON"), "USE_MAGMA", "ON")
    with pytest.raises(MegabuildError, match=r"turned it back to OFF: .*MAGMA was not found.* the magma flavour was not built"):
        check_flipped(cache_with(tmp_path, "USE_MAGMA:BOOL=OFF"), "USE_MAGMA", "ON")


def test_a_flavour_is_recorded_only_for_the_cache_that_built_it(tmp_path: Path) -> None:
    stage = tmp_path / "cuda-linalg" / "magma"
    (stage / "lib").mkdir(parents=True)
    (stage / "lib" / "libtorch_cuda_linalg.so").write_bytes(b"magma+cusolver")
    with pytest.raises(MegabuildError, match=r"would be recorded as magma, but .* USE_MAGMA=OFF"):
        linalg_flavour.record(stage, "OFF")
    linalg_flavour.record(stage, "ON")
    linalg_flavour.check(stage)
    linalg_flavour.forget(stage)
    with pytest.raises(MegabuildError, match="has no record of its MAGMA flavour"):
        linalg_flavour.check(stage)


def test_the_configure_only_entry_is_probed(tmp_path: Path) -> None:
    """This environment's scikit-build-core (requirements-dev.txt's) has it; a package without
    `_build_wheel_impl(..., exit_after_config=...)` answers 3, and the split then checks after
    the build."""
    pytest.importorskip("scikit_build_core")
    real = subprocess.run([sys.executable, str(CONFIGURE_SCRIPT), "--probe"], capture_output=True, text=True)
    assert real.returncode == 0, real.stderr
    fake = tmp_path / "scikit_build_core" / "build"
    fake.mkdir(parents=True)
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "wheel.py").write_text("def _build_wheel_impl(wheel_directory, config_settings, metadata_directory):\n    pass\n")
    other = subprocess.run([sys.executable, str(CONFIGURE_SCRIPT), "--probe"], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})
    assert other.returncode == 3, other.stderr
