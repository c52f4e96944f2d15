"""What a CUDA build of PyTorch from source would not have, and a PyTorch CUDA wheel has.

PyTorch's wheel builds add things to the CMake output that a conda build has no reason to:
RPATH entries into `site-packages/nvidia/*/lib` (where pip puts the NVIDIA runtime wheels) and
Requires-Dist entries for those wheels and triton (PYTORCH_EXTRA_INSTALL_REQUIREMENTS). The
wheel front end removes both, so the payload is what `setup.py build` in a conda environment
leaves. Also here: which CUDA version a wheel was built for, and which MAGMA flavour its
libtorch_cuda_linalg is.
"""
from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path
from typing import Callable

# a MAGMA entry point PyTorch calls only under AT_MAGMA_ENABLED() (its MAGMAQueue): a library
# linked to libmagma.so names it as an undefined symbol, one with MAGMA linked in statically
# (PyTorch's own CUDA wheels) defines it; a nomagma build has neither. recipe.yaml greps for it.
MAGMA_MARKER_SYMBOL = b"magma_queue_create_from_cuda_internal"
# pip's package names for what the wheel builds add to Requires-Dist
WHEEL_BUILD_REQUIREMENTS = re.compile(r"^Requires-Dist:\s*(nvidia-|cuda-|triton\b)", re.IGNORECASE)


def wheel_cuda_version(wheel: Path) -> str | None:
    """`13.0` for a cu130 wheel, None for a CPU wheel (torch/version.py's `cuda`)."""
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read("torch/version.py").decode()
    match = re.search(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None


def links_magma(library: Path) -> bool:
    """Whether libtorch_cuda_linalg was built with MAGMA (dynamically or statically linked)."""
    return MAGMA_MARKER_SYMBOL in library.read_bytes()


def source_build_metadata(text: str) -> str:
    """METADATA without the requirements only PyTorch's wheel builds add (a conda build of
    the source lists the CUDA libraries and triton as conda run requirements instead)."""
    return "".join(line for line in text.splitlines(keepends=True) if not WHEEL_BUILD_REQUIREMENTS.match(line))


def rpath(library: Path) -> list[str]:
    out = subprocess.run(["patchelf", "--print-rpath", str(library)], capture_output=True, text=True,
                         check=True).stdout.strip()
    return [entry for entry in out.split(":") if entry]


def keep_rpath_entries(library: Path, keep: Callable[[str], bool]) -> bool:
    """Keep only the RPATH/RUNPATH entries `keep` accepts; True when the library changed."""
    entries = rpath(library)
    kept = [e for e in entries if keep(e)]
    if kept != entries:
        subprocess.run(["patchelf", "--set-rpath", ":".join(kept), str(library)], check=True)
    return kept != entries


def drop_nvidia_rpath(library: Path) -> bool:
    """Remove the library's RPATH entries into site-packages/nvidia (`$ORIGIN` stays)."""
    return keep_rpath_entries(library, lambda entry: "/nvidia/" not in entry)


def drop_wheel_rpaths(lib_dir: Path) -> list[Path]:
    """drop_nvidia_rpath on every library in lib_dir; returns the libraries changed."""
    return [library for library in sorted(lib_dir.glob("*.so*"))
            if library.is_file() and not library.is_symlink() and drop_nvidia_rpath(library)]
