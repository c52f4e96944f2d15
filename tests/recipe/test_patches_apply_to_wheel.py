"""The recipe's patches to files the real torch wheels ship: they apply without fuzz to the
wheel's copies, and do what their headers say (compiled and run, not just grepped). Every test
runs on the cached 2.13.0 CPU wheel and, where pip's local index has it, on the 2.14.1 cu130
wheel (the recipe's release)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.real_wheel.wheel_frontend import apply_patch_to_wheel_tree, patch_targets, recipe_patches, wheel_path

pytestmark = [pytest.mark.download]

REPO = REPO_ROOT
PATCHES = recipe_patches(REPO / "recipe" / "meta.yaml")
# the patches whose every file the wheel carries (the others change CMake sources the wheel
# only has in generated form); a patch moving between the two groups must be noticed
EXPECTED_ON_WHEEL = {
    "0001-cpp_extension-find-conda-CUDA-target-directory.patch",
    "0003-cpp_extension-include-external-pybind11.patch",
    "0008-python_headers-define-PY_SSIZE_T_CLEAN.patch",
    "0009-c10d-control_plane-Handlers-include-unordered_map.patch",
    "0010-pybind_utils-export-_tryToInferTypeImpl.patch",
}


@pytest.fixture(scope="module", params=["torch_wheel", "cuda_torch_wheel"], ids=["2.13.0-cpu", "2.14.1-cu130"])
def patched_wheel_tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The wheel's torch/utils, torch/include/{torch,c10} unpacked and patched in recipe order."""
    torch_wheel = request.getfixturevalue(request.param)   # the CUDA wheel's fixture skips without it
    tree = tmp_path_factory.mktemp("wheel-tree")
    wanted = ("torch/utils/", "torch/include/torch/csrc/", "torch/include/c10/", "torch/_inductor/cpp_builder.py",
              "torch/lib/libtorch_python.so")
    with zipfile.ZipFile(torch_wheel) as wheel:
        wheel.extractall(tree, [n for n in wheel.namelist() if n.startswith(wanted)])
    pristine = tree.parent / (tree.name + "-pristine")
    shutil.copytree(tree, pristine)
    results = {patch.name: apply_patch_to_wheel_tree(patch, tree) for patch in PATCHES}
    return tree, pristine, results


def test_every_patch_is_accounted_for(patched_wheel_tree) -> None:
    _, _, results = patched_wheel_tree
    assert {name for name, (applied, _) in results.items() if applied} == EXPECTED_ON_WHEEL
    for name, (applied, output) in results.items():
        if applied:  # no offsets beyond the wheel's one-line header guard, no fuzz
            assert "fuzz" not in output, (name, output)


@pytest.mark.compile
def test_py_ssize_t_clean_is_defined_before_python_h(patched_wheel_tree, tmp_path: Path) -> None:
    """A translation unit that includes the installed python_headers.h sees PY_SSIZE_T_CLEAN
    (and without the patch it does not): checked by the real compiler."""
    cxx = shutil.which("c++") or shutil.which("g++")
    if not cxx:
        pytest.skip("no C++ compiler on PATH")
    tree, pristine, _ = patched_wheel_tree
    probe = tmp_path / "probe.cpp"
    probe.write_text("#include <torch/csrc/python_headers.h>\n"
                     "#ifndef PY_SSIZE_T_CLEAN\n#error PY_SSIZE_T_CLEAN not defined\n#endif\n"
                     "int main() { return 0; }\n")

    def compile_with(root: Path) -> subprocess.CompletedProcess:
        return subprocess.run([cxx, "-std=c++20", "-fsyntax-only", f"-I{root / 'torch' / 'include'}",
                               f"-I{sysconfig.get_paths()['include']}", str(probe)],
                              capture_output=True, text=True)
    patched = compile_with(tree)
    assert patched.returncode == 0, patched.stderr[-2000:]
    unpatched = compile_with(pristine)
    assert unpatched.returncode != 0 and "PY_SSIZE_T_CLEAN not defined" in unpatched.stderr


def test_handlers_header_includes_unordered_map_itself(patched_wheel_tree) -> None:
    tree, pristine, _ = patched_wheel_tree
    relative = wheel_path("torch/csrc/distributed/c10d/control_plane/Handlers.hpp")
    assert "#include <unordered_map>" in (tree / relative).read_text()
    assert "#include <unordered_map>" not in (pristine / relative).read_text()


def test_source_paths_map_to_the_wheel_layout() -> None:
    assert wheel_path("torch/csrc/python_headers.h") == "torch/include/torch/csrc/python_headers.h"
    assert wheel_path("torch/utils/cpp_extension.py") == "torch/utils/cpp_extension.py"
    assert wheel_path("cmake/Dependencies.cmake") == "cmake/Dependencies.cmake"
    targets = {t for p in PATCHES for t in patch_targets(p)}
    assert "cmake/Modules/FindOpenBLAS.cmake" in targets  # a source-only file: not in the wheel


def test_try_to_infer_type_impl_is_called_inline_but_not_exported(patched_wheel_tree) -> None:
    """Why 0010 exists, on the real binaries: the installed header's inline tryToInferType()
    calls detail::_tryToInferTypeImpl, which the wheel's libtorch_python.so does not export;
    the patched declaration carries TORCH_PYTHON_API (default visibility)."""
    nm = shutil.which("nm")
    if not nm:
        pytest.skip("nm (binutils) not on PATH")
    tree, pristine, _ = patched_wheel_tree
    exported = subprocess.run([nm, "-DC", "--defined-only", str(pristine / "torch" / "lib" / "libtorch_python.so")],
                              capture_output=True, text=True, check=True).stdout
    assert "torch::jit::toPyObject(c10::IValue)" in exported  # declared with TORCH_PYTHON_API
    assert "_tryToInferTypeImpl" not in exported
    relative = wheel_path("torch/csrc/jit/python/pybind_utils.h")
    header = (pristine / relative).read_text()
    assert "inline InferredType tryToInferType(py::handle input) {" in header
    assert "auto ty = detail::_tryToInferTypeImpl(input);" in header
    assert "TORCH_PYTHON_API std::optional<InferredType> _tryToInferTypeImpl(" in (tree / relative).read_text()
