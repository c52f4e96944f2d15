"""nvcc as a conda package, for the gpu image's build stage (python -m feedstock image builds
CUDA extensions with the image channels' `cuda-nvcc`, as conda-forge names it).

No conda channel is reachable here, so the package is made from NVIDIA's own PyPI wheels
(tests/realbuild/nvcc-requirements.txt): their `nvidia/cu13/` trees (bin/ with nvcc and
nvcc.profile, nvvm/, include/ with crt/ and cccl/, the runtime's headers) merged into `$PREFIX`,
which is then a CUDA home as nvcc.profile expects it, the layout of /usr/local/cuda. The
runtime's libraries stay with `cuda-cudart` and `cuda-cudart-dev` of the NVIDIA channel
(tests/support/nvidia_wheels.py), which this package requires. conda-forge's real cuda-nvcc
splits the same files over more packages and keeps headers under targets/x86_64-linux/include;
the build stage handles both (feedstock/after_build/image/build_tools.py).

Cached like the NVIDIA channel, keyed by the wheels' sha256 and this file.
"""
from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

from tests.support.nvidia_wheels import BUILD_STRING, cached_packages, download_pinned, inputs_key
from tests.support.toolchain import ToolchainUnavailable, recipe_output

REQUIREMENTS = Path(__file__).resolve().parents[1] / "realbuild" / "nvcc-requirements.txt"
TREE = "nvidia/cu13/"


def _wheels(dest: Path) -> list[Path]:
    download_pinned(REQUIREMENTS, dest)
    return sorted(dest.glob("*.whl"))


def _merge(wheels: list[Path], tree: Path) -> None:
    """Every wheel's nvidia/cu13/ files into one tree; the runtime's libraries are left out
    (cuda-cudart has them)."""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            for member in zf.infolist():
                if not member.filename.startswith(TREE) or member.is_dir():
                    continue
                relative = member.filename[len(TREE):]
                if relative.startswith("lib/libcudart"):
                    continue
                target = tree / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, target.open("wb") as out:
                    shutil.copyfileobj(src, out, 16 << 20)
                if member.external_attr >> 16 & 0o111 or relative.startswith(("bin/", "nvvm/bin/")):
                    os.chmod(target, 0o755)
    # a CUDA installer's layout: nvcc.profile may look under targets/<arch>/ (its _TARGET_DIR_)
    targets = tree / "targets" / "x86_64-linux"
    targets.mkdir(parents=True, exist_ok=True)
    for name in ("include", "lib"):
        (targets / name).symlink_to(f"../../{name}")


def nvcc_channel(channel: Path, work: Path, cudart: str = "13.0.96", log=print) -> list[Path]:
    """`cuda-nvcc` in `channel` (indexed), from the cache when these wheels were packaged before."""
    wheels = _wheels(work / "wheels")
    version = next((w.name.split("-")[1] for w in wheels if w.name.startswith("nvidia_cuda_nvcc-")), None)
    if version is None:
        raise ToolchainUnavailable(f"pip download left no nvidia_cuda_nvcc wheel in {work / 'wheels'}")
    tree = work / "tree"

    def outputs() -> list[dict]:
        shutil.rmtree(tree, ignore_errors=True)
        _merge(wheels, tree)
        untouched = {"dynamic_linking": {"binary_relocation": False}, "prefix_detection": {"ignore": True}}
        return [recipe_output("cuda-nvcc", version, BUILD_STRING, [f'cp -a "{tree}/." "$PREFIX/"'],
                              f"NVIDIA's nvcc {version} wheels as a CUDA home in $PREFIX",
                              run=[f"cuda-cudart-dev =={cudart}"], extra_build=untouched)]

    try:
        return cached_packages("nvcc-conda", inputs_key(Path(__file__), wheels), channel, work, "cuda-nvcc",
                               outputs, f"nvcc: {len(wheels)} wheels", log)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
