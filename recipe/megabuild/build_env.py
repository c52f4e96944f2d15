"""The build environment: one function from the conda-build variant to the child processes' env.

`build_environment(variant, base)` is the only place that decides what PyTorch's build sees.
Every step calls it with the same inputs, so the libtorch and pytorch steps can never disagree
about an environment variable (a changed variable between steps used to mean a full rebuild).
The steps never read `os.environ`; they use `BuildContext.env`.

What it sets, on top of `base` (the environment conda-build gave the driver):

- backend: `USE_CUDA`, `USE_ROCM`, `TORCH_CUDA_ARCH_LIST` (table per CUDA `major.minor`,
  `FEEDSTOCK_CUDA_ARCH_LIST` overrides), `PYTORCH_ROCM_ARCH` (table per ROCm `major.minor`,
  `FEEDSTOCK_ROCM_ARCH` overrides), `ROCM_PATH` (first in `CMAKE_PREFIX_PATH`, before
  `$PREFIX`); an unknown version is a one-line error;
- `USE_MAGMA=0`: the first configure is always without MAGMA, the split step flips it in the
  cache afterwards (the environment no longer reaches CMake once the cache exists);
- BLAS: `BLAS=MKL` for `blas_impl=mkl` (x86_64 only), `BLAS=Generic` (netlib interface) else;
  `USE_MKLDNN` on except for ROCm;
- `MAX_JOBS` = min(CPU count, available memory / memory per job), where memory per job is
  larger for GPU builds; `FEEDSTOCK_MAX_JOBS` overrides;
- `CMAKE_{C,CXX,CUDA}_COMPILER_LAUNCHER=ccache` when `CCACHE_DIR` is set and ccache is on PATH
  (an explicit launcher in `base` wins);
- `USE_SYSTEM_*` for the dependencies the channel ships, `BUILD_CUSTOM_PROTOBUF=OFF` (the
  channel's libprotobuf, not a bundled copy), `BUILD_TEST=0`, `PYTORCH_BUILD_VERSION/NUMBER`
  from the package version and build number;
- flag clean-ups: `-std=...` is removed from C/C++ flags (PyTorch chooses its own standard).
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Mapping

from .errors import MegabuildError

# CUDA major.minor -> TORCH_CUDA_ARCH_LIST. CUDA 13 dropped everything before Turing (7.5).
CUDA_ARCH_LISTS: dict[str, str] = {
    "12.9": "5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX",
    "13.0": "7.5;8.0;8.6;8.9;9.0;10.0;11.0;12.0+PTX",
}
# ROCm major.minor -> PYTORCH_ROCM_ARCH (the gfx targets the ROCm release supports).
ROCM_ARCH_LISTS: dict[str, str] = {
    "6.3": "gfx900;gfx906;gfx908;gfx90a;gfx942;gfx1030;gfx1100;gfx1101;gfx1102",
    "6.4": "gfx900;gfx906;gfx908;gfx90a;gfx942;gfx1030;gfx1100;gfx1101;gfx1102;gfx1200;gfx1201",
    "7.0": "gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1200;gfx1201",
    "7.1": "gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1102;gfx1200;gfx1201",
    "7.2": "gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1102;gfx1150;gfx1151;"
           "gfx1200;gfx1201",
}
# Memory one compile job may need, in GiB: PyTorch's C++ needs several, CUDA/HIP kernels more.
GIB_PER_JOB_CPU = 3
GIB_PER_JOB_GPU = 6
# Dependencies taken from the channel instead of PyTorch's third_party copies.
SYSTEM_LIBS = ("USE_SYSTEM_SLEEF", "USE_SYSTEM_PYBIND11", "USE_SYSTEM_EIGEN_INSTALL",
               "USE_SYSTEM_CPUINFO", "USE_SYSTEM_PTHREADPOOL", "USE_SYSTEM_FXDIV",
               "USE_SYSTEM_PSIMD", "USE_SYSTEM_FP16")
MKL_PLATFORMS = ("linux-64", "osx-64", "win-64")
NONE_VALUES = ("", "none", "None", "false")


def gpu_backend(variant: Mapping[str, str]) -> str:
    """"cuda", "rocm" or "cpu" for a variant."""
    explicit = variant.get("gpu_backend", "").lower()
    if explicit in ("cuda", "rocm", "cpu"):
        return explicit
    if variant.get("cuda_compiler_version", "None") not in NONE_VALUES:
        return "cuda"
    if variant.get("rocm_version", "None") not in NONE_VALUES:
        return "rocm"
    return "cpu"


def _major_minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2])


def cuda_arch_list(version: str) -> str:
    key = _major_minor(version)
    if key not in CUDA_ARCH_LISTS:
        raise MegabuildError(f"unknown CUDA version {version!r}: no TORCH_CUDA_ARCH_LIST for it; "
                             f"known: {', '.join(sorted(CUDA_ARCH_LISTS))} (add it to "
                             "CUDA_ARCH_LISTS in megabuild/build_env.py or set "
                             "FEEDSTOCK_CUDA_ARCH_LIST)")
    return CUDA_ARCH_LISTS[key]


def rocm_arch_list(version: str) -> str:
    key = _major_minor(version)
    if key not in ROCM_ARCH_LISTS:
        raise MegabuildError(f"unknown ROCm version {version!r}: no PYTORCH_ROCM_ARCH for it; "
                             f"known: {', '.join(sorted(ROCM_ARCH_LISTS))} (add it to "
                             "ROCM_ARCH_LISTS in megabuild/build_env.py or set FEEDSTOCK_ROCM_ARCH)")
    return ROCM_ARCH_LISTS[key]


def mem_available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """MemAvailable from /proc/meminfo, or None where there is no such file (macOS)."""
    try:
        text = meminfo.read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise MegabuildError(f"{name}={value!r} is not a positive whole number; set it to the "
                             "number of parallel compile jobs, e.g. 4")
    return number


def max_jobs(cpu_count: int, mem_bytes: int | None, gpu: bool) -> int:
    per_job = (GIB_PER_JOB_GPU if gpu else GIB_PER_JOB_CPU) * 1024 ** 3
    by_memory = cpu_count if mem_bytes is None else max(1, mem_bytes // per_job)
    return max(1, min(cpu_count, by_memory))


def _clean_flags(flags: str) -> str:
    return " ".join(f for f in flags.split() if not f.startswith("-std="))


def build_environment(variant: Mapping[str, str], base: Mapping[str, str], *,
                      meminfo: Path = Path("/proc/meminfo")) -> dict[str, str]:
    """The complete environment for PyTorch's build, for one variant (see module doc)."""
    env = dict(base)
    backend = gpu_backend(variant)
    platform = variant.get("target_platform", "linux-64")

    env["USE_CUDA"] = "1" if backend == "cuda" else "0"
    env["USE_ROCM"] = "1" if backend == "rocm" else "0"
    env["USE_MAGMA"] = "0"
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    env.pop("PYTORCH_ROCM_ARCH", None)
    if backend == "cuda":
        override = base.get("FEEDSTOCK_CUDA_ARCH_LIST", "")
        env["TORCH_CUDA_ARCH_LIST"] = override or cuda_arch_list(
            variant.get("cuda_compiler_version", ""))
        env["USE_NCCL"] = "1"
        env["USE_SYSTEM_NCCL"] = "1"
    elif backend == "rocm":
        override = base.get("FEEDSTOCK_ROCM_ARCH", "")
        env["PYTORCH_ROCM_ARCH"] = override or rocm_arch_list(variant.get("rocm_version", ""))
        env["ROCM_PATH"] = base.get("ROCM_PATH", "/opt/rocm")
        # ROCm's own CMake packages and headers must win over same-named ones in the prefix
        order = [env["ROCM_PATH"], base.get("PREFIX", "")] + base.get(
            "CMAKE_PREFIX_PATH", "").split(os.pathsep)
        env["CMAKE_PREFIX_PATH"] = os.pathsep.join(dict.fromkeys(p for p in order if p))

    blas = variant.get("blas_impl", "generic")
    if blas == "mkl":
        if platform not in MKL_PLATFORMS:
            raise MegabuildError(f"blas_impl=mkl is not available on {platform}; use "
                                 "blas_impl=generic there")
        env["BLAS"] = "MKL"
    elif blas == "generic":
        env["BLAS"] = "Generic"
    else:
        raise MegabuildError(f"unknown blas_impl {blas!r}; expected 'mkl' or 'generic'")
    env["USE_MKLDNN"] = "0" if backend == "rocm" else "1"

    cpus = _positive_int("CPU_COUNT", variant.get("CPU_COUNT") or base.get("CPU_COUNT")
                         or str(os.cpu_count() or 1))
    if base.get("FEEDSTOCK_MAX_JOBS"):
        env["MAX_JOBS"] = str(_positive_int("FEEDSTOCK_MAX_JOBS", base["FEEDSTOCK_MAX_JOBS"]))
    else:
        env["MAX_JOBS"] = str(max_jobs(cpus, mem_available_bytes(meminfo), backend != "cpu"))

    if base.get("CCACHE_DIR") and shutil.which("ccache", path=base.get("PATH", os.defpath)):
        for lang in ("C", "CXX", "CUDA"):
            env.setdefault(f"CMAKE_{lang}_COMPILER_LAUNCHER", "ccache")

    for name in SYSTEM_LIBS:
        env[name] = "1"
    # libtorch must not ship test programs (~50 MB in bin/, test libraries in lib/), nor its own
    # protoc and google/protobuf headers, which would clobber the channel's libprotobuf
    env["BUILD_TEST"] = "0"
    env["BUILD_CUSTOM_PROTOBUF"] = "OFF"
    if variant.get("PKG_VERSION"):
        env["PYTORCH_BUILD_VERSION"] = variant["PKG_VERSION"]
    if variant.get("PKG_BUILDNUM"):
        env["PYTORCH_BUILD_NUMBER"] = variant["PKG_BUILDNUM"]
    for name in ("CFLAGS", "CXXFLAGS", "CPPFLAGS", "DEBUG_CXXFLAGS"):
        if name in env:
            env[name] = _clean_flags(env[name])
    env["CMAKE_GENERATOR"] = "Ninja"
    return env
