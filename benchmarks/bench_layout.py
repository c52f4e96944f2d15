#!/usr/bin/env python3
"""Benchmark: our installed pytorch-gpu prefix against a pip virtual environment of the same binaries.

    .venv/bin/python benchmarks/bench_layout.py --prefix PREFIX [--venv VENV] [--runs 15]

PREFIX is a conda prefix where pytorch-gpu is installed (tests/realbuild/test_real_cuda_wheel.py
installs one with py-rattler; pytest keeps its folder: `<basetemp>/realbuild0/cuda-wheel/elsewhere/env`).
VENV is a virtual environment where `pip install torch==<same version>` put the wheel and the
NVIDIA wheels; without --venv one is made (pip's local index serves them offline).

- import time: `import torch` in fresh processes, alternating prefix and venv, median of each
  (the first run of each is dropped: it fills the page cache);
- size: bytes on disk of each whole environment, hard links counted once.

Last line: `layout: import ratio X.XX; size ratio Y.YY` (prefix / venv; lower is better).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def disk_bytes(root: Path) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def import_seconds(python: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH")}
    start = time.perf_counter()
    subprocess.run([str(python), "-c", "import torch"], check=True, env=env)
    return time.perf_counter() - start


def torch_version(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"], check=True,
                          capture_output=True, text=True).stdout.strip()


def make_venv(python: Path, version: str, dest: Path) -> Path:
    subprocess.run([str(python), "-m", "venv", str(dest)], check=True)
    subprocess.run([str(dest / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    f"torch=={version}"], check=True)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=Path, required=True, help="conda prefix with pytorch-gpu installed")
    parser.add_argument("--venv", type=Path, help="pip venv with the same torch (default: make one)")
    parser.add_argument("--runs", type=int, default=15, help="imports per environment (default 15)")
    args = parser.parse_args(argv)
    prefix_python = args.prefix / "bin" / "python"
    if not prefix_python.is_file():
        print(f"error: {args.prefix} has no bin/python; pass the prefix pytorch-gpu was installed into",
              file=sys.stderr)
        return 2
    version = torch_version(prefix_python).split("+")[0]
    venv = args.venv or make_venv(prefix_python.resolve(), version, Path(tempfile.mkdtemp(prefix="bench-layout-")) / "venv")
    venv_python = venv / "bin" / "python"
    if torch_version(venv_python).split("+")[0] != version:
        print(f"error: {venv} has another torch than {version}", file=sys.stderr)
        return 2
    times: dict[str, list[float]] = {"prefix": [], "venv": []}
    for _ in range(args.runs + 1):
        times["prefix"].append(import_seconds(prefix_python))
        times["venv"].append(import_seconds(venv_python))
    medians = {k: statistics.median(v[1:]) for k, v in times.items()}
    sizes = {"prefix": disk_bytes(args.prefix), "venv": disk_bytes(venv)}
    for key in ("prefix", "venv"):
        print(f"{key}: import torch {medians[key]:.3f} s (median of {args.runs}), {sizes[key] / 2**30:.2f} GiB")
    print(f"layout: import ratio {medians['prefix'] / medians['venv']:.2f}; "
          f"size ratio {sizes['prefix'] / sizes['venv']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
