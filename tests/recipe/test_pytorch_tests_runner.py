"""The pytorch-tests output's runner (recipe/pytorch_tests): which files and skips apply per
platform and variant, and a real pytest run through it on a PyTorch-shaped test/ folder."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

REPO = REPO_ROOT
RUNNER = REPO / "recipe" / "pytorch_tests" / "run_pytorch_tests.py"
SELECTION = json.loads((REPO / "recipe" / "pytorch_tests" / "selection.json").read_text())

sys.path.insert(0, str(RUNNER.parent))
import run_pytorch_tests as runner  # noqa: E402


def facts(**overrides):
    return {"platform": "linux-64", "gpu_backend": "cpu", "blas": "generic", "python": "3.12",
            "gpu_present": False, **overrides}


def make_tests_tree(tmp_path: Path) -> Path:
    tests = tmp_path / "src" / "test"
    tests.mkdir(parents=True)
    for entry in SELECTION["files"]:
        (tmp_path / "src" / entry["path"]).write_text("def test_ok():\n    pass\n")
    return tests


def selected(command: list[str]) -> tuple[list[str], str]:
    files = [c for c in command if c.endswith(".py") and not c.endswith("run_pytorch_tests.py")]
    k = command[command.index("-k") + 1] if "-k" in command else ""
    return files, k


def test_every_skip_says_why_and_uses_known_conditions() -> None:
    for entry in SELECTION["skips"] + SELECTION["files"]:
        assert set(entry.get("when", {})) <= set(runner.CONDITIONS), entry
    assert all(skip["why"].strip() for skip in SELECTION["skips"])


def test_files_and_skips_follow_platform_and_variant(tmp_path: Path) -> None:
    tests = make_tests_tree(tmp_path)
    files, k = selected(runner.pytest_command(SELECTION, facts(), tests, []))
    assert "test_mkldnn.py" in files and "test_linalg.py" in files
    assert "TestNN and test_module_backcompat" in k and "test_qengine" not in k
    assert "test_lstm_cpu" not in k
    rocm, _ = selected(runner.pytest_command(SELECTION, facts(gpu_backend="rocm"), tests, []))
    assert "test_mkldnn.py" not in rocm  # no oneDNN in ROCm builds
    _, aarch = selected(runner.pytest_command(SELECTION, facts(platform="linux-aarch64"), tests, []))
    assert "test_lstm_cpu" in aarch and "test_eigh_lwork_lapack" in aarch
    _, py312 = selected(runner.pytest_command(SELECTION, facts(), tests, []))
    _, py311 = selected(runner.pytest_command(SELECTION, facts(python="3.11"), tests, []))
    assert "test_complex_python_literal_backward_cpu" in py312
    assert "test_complex_python_literal_backward_cpu" not in py311


def test_gpu_only_skips_apply_only_with_a_gpu(tmp_path: Path) -> None:
    tests = make_tests_tree(tmp_path)
    _, without = selected(runner.pytest_command(SELECTION, facts(gpu_backend="cuda"), tests, []))
    _, with_gpu = selected(runner.pytest_command(
        SELECTION, facts(gpu_backend="cuda", gpu_present=True), tests, []))
    assert "test_indirect_device_assert" not in without
    assert "test_indirect_device_assert" in with_gpu


def test_missing_test_file_is_one_clear_error(tmp_path: Path) -> None:
    tests = make_tests_tree(tmp_path)
    (tests / "test_nn.py").unlink()
    proc = subprocess.run([sys.executable, str(RUNNER), "--tests-dir", str(tests), "--platform",
                           "linux-64", "--gpu-backend", "cpu", "--blas", "generic"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: 1 selected test file(s) missing under {tests.parent} (first: test/test_nn.py); "
        "the pytorch-tests output needs test/ from the source tarball (source_files)"]


def test_real_pytest_run_deselects_the_skips_and_reports_failures(tmp_path: Path) -> None:
    """pytest runs for real: a test named in the skip list is deselected, the others run, a
    failing one makes the runner fail; the source tree's torch/ does not shadow imports."""
    tests = make_tests_tree(tmp_path)
    # a module at the source root, like PyTorch's uncompiled torch/: must not be importable
    (tmp_path / "src" / "source_root_marker.py").write_text("")
    (tests / "test_torch.py").write_text(
        "import importlib.util\n\n"
        "class TestTorch:\n"
        "    def test_print(self):\n        raise AssertionError('must be deselected')\n\n"
        "    def test_source_root_is_not_on_sys_path(self):\n"
        "        assert importlib.util.find_spec('source_root_marker') is None\n\n"
        "    def test_tensor_cycle_via_slots(self):\n        raise AssertionError('must be deselected')\n")
    args = [sys.executable, str(RUNNER), "--tests-dir", str(tests), "--platform", "linux-64",
            "--gpu-backend", "cpu", "--blas", "generic"]
    ok = subprocess.run(args, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
    assert "GPU present: no" in ok.stdout
    assert "8 passed, 2 deselected" in ok.stdout, ok.stdout[-1500:]
    (tests / "test_nn.py").write_text("def test_broken():\n    raise AssertionError('boom')\n")
    failed = subprocess.run(args, capture_output=True, text=True)
    assert failed.returncode == 1 and "boom" in failed.stdout
