"""What the build stage adds to the image's environment for its flavour: the compilers, and the
CUDA or ROCm development files where the flavour needs them.

- every flavour: Debian's g++, make, ninja, git and ccache in the build base;
- gpu: nvcc and the CUDA runtime's headers as conda packages (`cuda-nvcc`, `cuda-cudart-dev`,
  conda-forge's names) of the image's CUDA version, solved from the image's own channels into a
  prefix of their own, /opt/build-dev, which becomes CUDA_HOME. A prefix of its own: the image's
  /opt/env in the build stage is hard links of the layers already written, never installed into.
  conda-forge's CUDA packages keep their headers under targets/x86_64-linux/include, where
  torch's CUDAExtension does not look (pytorch/pytorch#144690), so that folder goes on CPATH;
- rocm: Debian's hipcc, the HIP runtime's headers and the device libraries in the build base
  (the feedstock's ROCm packages use the system ROCm, as its build image's /opt/rocm; Debian's
  live under /usr, which becomes ROCM_HOME).

The variables that choose what is compiled for (TORCH_CUDA_ARCH_LIST, PYTORCH_ROCM_ARCH) and how
wide (MAX_JOBS) pass from the caller's environment by name, as the PIP_* names do.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ...errors import FeedstockError
from . import environment

DEV_PREFIX = "/opt/build-dev"
COMPILERS = ("g++", "make", "ninja-build", "git", "ccache")   # ccache: the compile cache (build_stage.py)
ROCM_DEBIAN = ("hipcc", "libamdhip64-dev", "rocm-device-libs")
CUDA_DEV = ("cuda-nvcc", "cuda-cudart-dev")
PASSED = ("TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH", "MAX_JOBS")


@dataclass(frozen=True)
class Toolset:
    flavour: str
    debian: tuple[str, ...]                              # the build base's packages beyond the runtime's
    conda_specs: tuple[str, ...] = ()                    # solved into DEV_PREFIX
    env: dict[str, str] = field(default_factory=dict)    # set in the build stage
    passed: tuple[str, ...] = ()                         # names passed from the caller's environment

    def engine_args(self) -> list[str]:
        args = [arg for name, value in sorted(self.env.items()) for arg in ("-e", f"{name}={value}")]
        return args + [arg for name in self.passed for arg in ("-e", name)]

    def describe(self) -> str:
        parts = [f"Debian {', '.join(self.debian)}"]
        if self.conda_specs:
            parts.append(f"{', '.join(self.conda_specs)} in {DEV_PREFIX}")
        return "; ".join(parts)


def toolset(flavour: str, records: list, environ: Mapping[str, str] = os.environ) -> Toolset:
    """The flavour's build tools, the CUDA ones pinned to the image's CUDA runtime."""
    passed = tuple(name for name in PASSED if environ.get(name))
    if flavour == "gpu":
        cudart = [str(r.version) for r in records if r.name.normalized == "cuda-cudart"]
        if not cudart:
            raise FeedstockError("the gpu image has no cuda-cudart package, so the build stage cannot tell "
                                 "which CUDA to compile for; check the channels' pytorch-gpu")
        major_minor = ".".join(cudart[0].split(".")[:2])
        specs = (f"cuda-nvcc {major_minor}.*", f"cuda-cudart-dev =={cudart[0]}")
        env = {"CUDA_HOME": DEV_PREFIX, "CUDA_PATH": DEV_PREFIX,
               "CPATH": f"{DEV_PREFIX}/targets/x86_64-linux/include",
               "LIBRARY_PATH": f"{DEV_PREFIX}/targets/x86_64-linux/lib:{DEV_PREFIX}/lib"}
        return Toolset(flavour, COMPILERS, specs, env, passed)
    if flavour == "rocm":
        return Toolset(flavour, COMPILERS + ROCM_DEBIAN, (), {"ROCM_HOME": "/usr", "ROCM_PATH": "/usr"}, passed)
    return Toolset(flavour, COMPILERS, (), {}, passed)


def install_dev(tools: Toolset, channels: list[str], cuda: str | None, root: Path, cache: Path) -> int:
    """Solve and install the toolset's conda packages into root/DEV_PREFIX; returns how many."""
    if not tools.conda_specs:
        return 0
    try:
        records = environment.solve_specs(channels, list(tools.conda_specs), cuda)
    except FeedstockError as err:
        raise FeedstockError(f"the {tools.flavour} build stage needs {', '.join(tools.conda_specs)} from the "
                             f"image's channels: {err}; add a channel that has them (conda-forge does)") from None
    prefix = root / DEV_PREFIX.lstrip("/")
    environment.install_prefix(records, prefix, DEV_PREFIX, cache)
    return len(records)
