"""The real PyTorch 2.13.0 binaries, packaged for real (issue 9, item 4).

The same pipeline as tests/realbuild/test_cpu_test_project.py (local toolchain channel, the feedstock's own
recipe.yaml built by rattler-build, py-rattler install elsewhere), with the real torch 2.13.0
cp311 wheel as the payload of a copy bumped back to 2.13.0 (`bump --allow-older`; the recipe is newer): $MEGABUILD_FRONTEND points the driver at the wheel front end
(tests/support/real_wheel/wheel_frontend.py), so build.sh, the driver's split/libtorch/pytorch steps,
rattler-build's relinking, prefix replacement and packaging all run on PyTorch's real libraries;
only the compiler is left out.

rattler-build runs every output's own test section here (libtorch's file checks and
find_package(Torch) build, pytorch's imports, pip check, torchrun, backend checks and
cmake_test, pytorch-tests' runner, pytorch-cpu's import): a failing one fails the build.
Then libtorch/pytorch/pytorch-cpu are installed by py-rattler into a fresh prefix and checked
there: import torch and a tensor op, pip check, cmake_test, a downstream CppExtension, and the
package-level checks (no file owned twice, no leaked build path, no symlink out of the prefix).
"""
from __future__ import annotations

import json
import shutil

import pytest

from tests.support.paths import REPO_ROOT

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")
pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

from tests.realbuild.install import (run_clean as run, absolute_rpaths, escaping_symlinks, files_in_two_packages,  # noqa: E402
                                     installed_files, leaked_paths)
from tests.realbuild.real_packages import CPU_PACKAGES as OUR_PACKAGES  # noqa: E402

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.download]


def test_real_binaries_packaged_and_tested_by_rattler_build(wheelbuild):
    names = wheelbuild["build"].names()
    for prefix in ("libtorch-2.13.0-cpu_generic_h", "pytorch-2.13.0-cpu_generic_py311_h",
                   "pytorch-tests-2.13.0-cpu_generic_py311_h", "pytorch-cpu-2.13.0-cpu_generic_h"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    libtorch = next(p for p in wheelbuild["build"].packages if p.name.startswith("libtorch-"))
    # the real libtorch_cpu.so alone is hundreds of MB: these are not the test project's libraries
    assert libtorch.stat().st_size > 50 * 2**20, libtorch.stat().st_size


def test_installed_torch_is_the_real_one_and_computes(wheelbuild):
    code = ("import json, torch; x = torch.arange(6.0).reshape(2, 3); "
            "print(json.dumps([torch.__version__, torch.__file__, float((x @ x.T).sum()), "
            "torch.backends.mkldnn.is_available(), torch.distributed.is_available()]))")
    version, location, total, mkldnn, distributed = json.loads(run([wheelbuild["python"], "-c", code]).stdout)
    assert version.split("+")[0] == "2.13.0"
    assert location.startswith(str(wheelbuild["prefix"]))
    assert total == 83.0 and mkldnn and distributed


def test_pip_check_in_the_installed_prefix(wheelbuild):
    proc = run([wheelbuild["python"], "-m", "pip", "check"])
    assert "No broken requirements found" in proc.stdout


def test_cmake_test_against_the_installed_prefix(wheelbuild, tmp_path):
    project = tmp_path / "cmake_test"
    shutil.copytree(REPO_ROOT / "recipe" / "cmake_test", project)
    prefix = wheelbuild["prefix"]
    build = tmp_path / "build"
    run(["cmake", "-S", project, "-B", build, "-G", "Ninja", "-DWITH_TORCH_PYTHON=ON",
         f"-DTorch_DIR={prefix / 'share/cmake/Torch'}", f"-DPython3_EXECUTABLE={wheelbuild['python']}"])
    run(["cmake", "--build", build])
    assert "torch_smoke OK" in run([build / "torch_smoke"]).stdout
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import torch_smoke_ext; "
            "print(float(torch_smoke_ext.scaled_sum(torch.ones(4), 2.5)))")
    assert run([wheelbuild["python"], "-c", code, build]).stdout.strip() == "10.0"


def test_downstream_cpp_extension_builds_and_runs(wheelbuild, tmp_path):
    src = tmp_path / "downstream_ext"
    shutil.copytree(REPO_ROOT / "tests" / "support" / "real_wheel" / "downstream_ext", src)
    python = wheelbuild["python"]
    # CFLAGS come after Python's own -O3 -g: unoptimised compiles of the torch headers are quicker
    run([python, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "--no-index", src],
        {"MAX_JOBS": "2", "CFLAGS": "-O0 -g0"})
    code = ("import torch, layout_ext; "
            "print(layout_ext.scaled_add(torch.ones(3), torch.arange(3.), 2.0).tolist())")
    assert json.loads(run([python, "-c", code]).stdout) == [1.0, 3.0, 5.0]
    # the libraries the extension runs with are the packaged ones, in the installed $PREFIX/lib
    # (CppExtension sets no rpath: importing torch first loads them, as upstream)
    maps = ("import os, torch, layout_ext; print(sorted({os.path.realpath(l.split()[-1]) "
            "for l in open('/proc/self/maps') if 'libtorch_cpu' in l}))")
    [loaded] = json.loads(run([python, "-c", maps]).stdout.replace("'", '"'))
    assert loaded == str((wheelbuild["prefix"] / "lib" / "libtorch_cpu.so").resolve()), loaded


def test_no_file_in_two_packages(wheelbuild):
    assert files_in_two_packages(wheelbuild["prefix"]) == {}


def test_no_build_path_leaks_into_installed_text_files(wheelbuild):
    build_dir = wheelbuild["build"].output_dir / "bld"
    # the build's work folder (the machine's cache entry) and its stand-in source
    needles = [str(build_dir), str(wheelbuild["build_work"]), str(wheelbuild["build_work"] / "source"),
               "host_env_placehold"]
    assert leaked_paths(wheelbuild["prefix"], needles, OUR_PACKAGES) == []


def test_every_symlink_resolves_inside_the_prefix(wheelbuild):
    prefix = wheelbuild["prefix"]
    files = installed_files(prefix)
    assert "lib/libtorch_cpu.so" in files.get("libtorch", []), sorted(files)
    assert (prefix / "lib/python3.11/site-packages/torch/lib/libtorch_cpu.so").is_symlink()
    assert escaping_symlinks(prefix, OUR_PACKAGES) == []


def test_no_run_path_outside_origin(wheelbuild):
    """rattler-build relinked the real libraries: no RPATH/RUNPATH names the build machine."""
    assert absolute_rpaths(wheelbuild["prefix"], OUR_PACKAGES) == []
