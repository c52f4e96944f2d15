"""The build environment: one function from the conda-build variant to the child processes' env.

`build_environment(variant, base)` is the only place that decides what PyTorch's build sees.
Every step calls it with the same inputs, so the libtorch and pytorch steps can never disagree
about an environment variable (a changed variable between steps used to mean a full rebuild).
The steps never read `os.environ`; they use `BuildContext.env`.

What it sets, on top of `base` (the environment conda-build gave the driver). Each setting
that came from a real build's failure is listed, with its reason, in recipe/README.md
("Build knowledge: parity with the conda-forge recipe").

- backend: `USE_CUDA`, `USE_ROCM`, `TORCH_CUDA_ARCH_LIST` (table per CUDA `major.minor`, and
  per `arm_variant_type` on linux-aarch64; `FEEDSTOCK_CUDA_ARCH_LIST` overrides; an arch that
  CUDA version cannot build is an error), `TORCH_NVCC_FLAGS` (compressed fatbins), the CUDA
  toolkit locations in `$PREFIX` (read by patch 0006); ROCm (`PYTORCH_ROCM_ARCH`, `ROCM_PATH`,
  `HIP_*`, include order, OpenMP, switches) comes from `megabuild/rocm.py`, applied last; an
  unknown version is a one-line error;
- `USE_MAGMA=0`: the first configure is always without MAGMA, the split step flips it in the
  cache afterwards (the environment no longer reaches CMake once the cache exists);
- BLAS: `BLAS=MKL` for `blas_impl=mkl` (x86_64 only); for `generic`, PyTorch's OpenBLAS path
  pointed at `$PREFIX` (patched to link the netlib-interface `lapack`, `cblas` and `blas` the
  channel ships, and to use the CBLAS dot convention); `USE_MKLDNN` on except for ROCm and
  osx-arm64;
- `MAX_JOBS` = min(CPU count, available memory / memory per job), where memory per job is
  larger for GPU builds; `FEEDSTOCK_MAX_JOBS` overrides; the heaviest targets
  (`job_pools.HEAVY_TARGETS`) get a Ninja pool of their own (`CMAKE_JOB_POOLS`,
  `CMAKE_PROJECT_INCLUDE`) sized from memory, never wider than `MAX_JOBS`;
  `FEEDSTOCK_HEAVY_JOBS` overrides its size;
- the compile cache (`compile_cache.py`): ccache as `CMAKE_{C,CXX,CUDA,HIP}_COMPILER_LAUNCHER`
  when `FEEDSTOCK_COMPILE_CACHE` (or `CCACHE_DIR`) is set and ccache is on PATH (an explicit
  launcher in `base` wins);
- `USE_SYSTEM_*` for the dependencies the channel ships (`system_libraries()`: each with the
  host package that provides it, which `python -m feedstock lint` checks against the recipe),
  `BUILD_CUSTOM_PROTOBUF=OFF` (the channel's libprotobuf, not a bundled copy),
  `BUILD_TEST=0`, `INSTALL_TEST=0`, features without a package in host off (`USE_NUMA`,
  `USE_ITT`, `USE_CUFILE`);
- `PYTORCH_BUILD_VERSION` from the package version and `PYTORCH_BUILD_NUMBER=0` always:
  PyTorch appends `.post<N>` to its version for N > 1, and the conda build number (up to 300
  here) would then disagree with the conda version;
- flag clean-ups: `-std=...` and `-fvisibility-inlines-hidden` are removed from C/C++ flags;
  in `LDFLAGS`, `-Wl,--as-needed` and `-dead_strip_dylibs` are removed (they drop the BLAS
  and MKL libraries PyTorch loads by symbol), `-z now` becomes `-z lazy` (GPU libraries must
  load lazily, or `import torch` fails on machines without a GPU driver) and Linux links get
  `-z noexecstack`; `_GLIBCXX_USE_CXX11_ABI=1`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from . import compile_cache, job_pools
from .errors import MegabuildError
from .rocm import ROCM_ARCH_LISTS, rocm_arch_list, rocm_environment  # noqa: F401
from .versions import known_major_minor, major_minor

# CUDA major.minor -> TORCH_CUDA_ARCH_LIST. CUDA 13 dropped everything before Turing (7.5).
# One entry per major.minor family that needs its own code: a cubin runs on every GPU of the
# same major version with an equal or higher minor, so 6.1 and 8.9 GPUs run the 6.0 and 8.6
# code; each extra entry costs compile time on the longest builds we have.
CUDA_ARCH_LISTS: dict[str, str] = {
    "12.9": "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    # no 11.0: Jetson Thor is an Arm SoC, no x86_64 machine has an sm_110 GPU (recipe/README.md)
    "13.0": "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
}
# linux-aarch64, per (arm_variant_type, CUDA major.minor); reasons in recipe/README.md
# ("CUDA on linux-aarch64"). sbsa 12.9 is the x86_64 list (Arm servers take the same PCIe and
# SXM GPUs). sbsa 13.0 adds 8.7 (Jetson Orin on CUDA 13 runs sbsa builds) and 12.1 (DGX
# Spark's GB10: its own SASS, not only the 12.0 code by the minor-version rule); 11.0 is
# Jetson Thor. tegra exists only for 12.9 and only Orin (8.7) runs it.
AARCH64_CUDA_ARCH_LISTS: dict[tuple[str, str], str] = {
    ("sbsa", "12.9"): "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    ("sbsa", "13.0"): "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX;12.1",
    ("tegra", "12.9"): "8.7+PTX",
}
# Compute capabilities each nvcc can build (`nvcc --list-gpu-arch`); an arch list, ours or a
# FEEDSTOCK_CUDA_ARCH_LIST, with anything else fails here rather than hours into the build.
# CUDA 13 dropped everything before 7.5 and renamed 10.1 to 11.0.
NVCC_ARCHS: dict[str, frozenset[str]] = {
    "12.9": frozenset("5.0 5.2 5.3 6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0 10.0 10.1 10.3 "
                      "12.0 12.1".split()),
    "13.0": frozenset("7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.3 11.0 12.0 12.1".split()),
}
# Fatbins compressed (libtorch_cuda is several hundred MB otherwise); CUDA 13 can favour size.
NVCC_FLAGS: dict[str, str] = {
    "12.9": "-Xfatbin -compress-all",
    "13.0": "-Xfatbin -compress-all -compress-mode=size",
}
# Where conda's CUDA packages put headers and libraries, per target platform.
CUDA_TARGET_DIRS: dict[str, str] = {"linux-64": "x86_64-linux", "linux-aarch64": "sbsa-linux"}
TEGRA_TARGET_DIR = "aarch64-linux"  # the tegra toolkit's name for linux-aarch64
# Memory one compile job may need, in GiB: PyTorch's C++ needs several, CUDA/HIP kernels more.
GIB_PER_JOB_CPU = 3
GIB_PER_JOB_GPU = 6
# Dependencies taken from the channel instead of PyTorch's third_party copies: the variable
# PyTorch reads, and the conda package that must be in host for CMake to find it. Only what a
# real build has proven (the conda-forge recipe of the same release); everything else stays
# bundled. fmt needs USE_SYSTEM_FMT, which 2.13.0 only has with a backport (deferred, see
# recipe/README.md).
SYSTEM_LIBS: dict[str, str] = {
    "USE_SYSTEM_SLEEF": "sleef",
    "USE_SYSTEM_PYBIND11": "pybind11",
    "USE_SYSTEM_EIGEN_INSTALL": "eigen",
}
CUDA_SYSTEM_LIBS: dict[str, str] = {
    "USE_SYSTEM_NCCL": "nccl",
    "USE_SYSTEM_NVTX": "nvtx-c",
}
# Features whose libraries are not in host: off, so CMake does not pick a system copy up.
# the build's temporary folder under the source tree, where TMPDIR is not set
TEMP_DIR_NAME = "megabuild-tmp"
FEATURES_OFF = ("USE_NUMA", "USE_ITT", "USE_CUFILE")
MKL_PLATFORMS = ("linux-64", "osx-64", "win-64")
# what "no value" looks like in a variant (compared lowercased): YAML's nulls and conda-smithy's None
NONE_VALUES = ("", "none", "null", "~", "false")


def is_none(value: str | None) -> bool:
    return value is None or str(value).strip().lower() in NONE_VALUES


def gpu_backend(variant: Mapping[str, str]) -> str:
    """"cuda", "rocm" or "cpu" for a variant: the one decision, which build-locally.py and the
    feedstock tools ask the driver for."""
    explicit = (variant.get("gpu_backend") or "").strip().lower()
    if explicit in ("cuda", "rocm", "cpu"):
        return explicit
    if not is_none(variant.get("cuda_compiler_version")):
        return "cuda"
    if not is_none(variant.get("rocm_version")):
        return "rocm"
    return "cpu"


def cuda_arch_list(version: str, platform: str = "linux-64", arm_variant: str = "sbsa") -> str:
    """Our TORCH_CUDA_ARCH_LIST for a CUDA version on a platform (and aarch64 flavour)."""
    fix = "set FEEDSTOCK_CUDA_ARCH_LIST or add it to megabuild/build_env.py"
    if platform != "linux-aarch64":
        return CUDA_ARCH_LISTS[known_major_minor(version, CUDA_ARCH_LISTS, "CUDA",
                                                 "no TORCH_CUDA_ARCH_LIST for it", fix)]
    variant = arm_variant if arm_variant in ("sbsa", "tegra") else "sbsa"
    table = {cuda: arch for (kind, cuda), arch in AARCH64_CUDA_ARCH_LISTS.items() if kind == variant}
    return table[known_major_minor(version, table, f"CUDA ({variant})",
                                   "no TORCH_CUDA_ARCH_LIST for it", fix)]


def check_cuda_archs(arch_list: str, version: str) -> None:
    """One clear line when `arch_list` names a compute capability this CUDA cannot build,
    naming what it can; versions without a table entry are left to nvcc, except that a family
    target (`10.0f`) before CUDA 12.9 is refused."""
    archs = [a.strip().removesuffix("+PTX") for a in re.split(r"[;\s]+", arch_list) if a.strip()]
    key = major_minor(version)
    known = NVCC_ARCHS.get(key)
    if known is None:
        cuda = _cuda_key(key)
        too_old = [a for a in archs if cuda is not None and a[-1:] in ARCH_SUFFIXES
                   and cuda < ARCH_SUFFIXES[a[-1]][1]]
        if too_old:
            suffix = too_old[0][-1]
            since = ".".join(map(str, ARCH_SUFFIXES[suffix][1]))
            raise MegabuildError(f"CUDA {key} cannot build compute capability {', '.join(too_old)}: "
                                 f"nvcc has {SUFFIX_NAMES[suffix]} `{suffix}` targets from CUDA "
                                 f"{since} on; drop the `{suffix}` or build with CUDA {since} or "
                                 "later (FEEDSTOCK_CUDA_ARCH_LIST / --cuda-arch)")
        return
    bad = [a for a in archs if not _builds(a, known)]
    if bad:
        lowest, highest = min(known, key=_cc_key), max(known, key=_cc_key)
        suffixed = "; ".join(f"{SUFFIX_NAMES[s]} {' '.join(t + s for t in suffixed_archs(known, s))}"
                             for s in ARCH_SUFFIXES)
        raise MegabuildError(f"CUDA {key} cannot build compute capability {', '.join(bad)} "
                             f"(it builds {lowest} to {highest}; {suffixed}); fix the "
                             "arch list (FEEDSTOCK_CUDA_ARCH_LIST / --cuda-arch)")


# nvcc's suffixed targets, spelled as TORCH_CUDA_ARCH_LIST takes them (PyTorch's
# select_compute_arch.cmake matches `X.Y[af]`): suffix -> (the lowest compute capability nvcc
# builds in that form, the first CUDA that has the form). `a`, arch-specific (sm_90a: that GPU
# only), from Hopper on; `f`, family-specific (sm_100f: 10.0 and 10.3 GPUs), added by CUDA 12.9
# for Blackwell on (12.9: 10.0f 10.1f 10.3f 12.0f 12.1f; 13.0: 10.0f 10.3f 11.0f 12.0f 12.1f,
# which test_cuda_arch_lists_nvcc.py compiles with the real nvcc)
ARCH_SUFFIXES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "a": ((9, 0), (12, 0)),
    "f": ((10, 0), (12, 9)),
}
SUFFIX_NAMES = {"a": "arch-specific", "f": "family-specific"}


def suffixed_archs(known: frozenset[str], suffix: str) -> list[str]:
    """The compute capabilities of `known` (one nvcc's) that it builds with `suffix`, in order."""
    lowest = ARCH_SUFFIXES[suffix][0]
    return sorted((a for a in known if _cc_key(a) >= lowest), key=_cc_key)


def _builds(arch: str, known: frozenset[str]) -> bool:
    if arch in known:
        return True
    base, suffix = arch[:-1], arch[-1:]
    return suffix in ARCH_SUFFIXES and base in suffixed_archs(known, suffix)


def _cuda_key(version: str) -> tuple[int, int] | None:
    try:
        major, minor = version.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _cc_key(arch: str) -> tuple[int, ...]:
    return tuple(int(part) for part in arch.split("."))


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


def system_libraries(backend: str) -> dict[str, str]:
    """`USE_SYSTEM_*` variable -> host package, for a backend ("cpu", "cuda", "rocm")."""
    return {**SYSTEM_LIBS, **(CUDA_SYSTEM_LIBS if backend == "cuda" else {})}


def reported_version(env: Mapping[str, str]) -> str:
    """The version PyTorch's setup.py gives torch (and pip) for this environment.

    PyTorch appends `.post<N>` when PYTORCH_BUILD_NUMBER is above 1; the lint compares this
    with the conda version the recipe's tests assert.
    """
    version = env.get("PYTORCH_BUILD_VERSION", "")
    number = int(env.get("PYTORCH_BUILD_NUMBER", "0") or 0)
    return f"{version}.post{number}" if number > 1 else version


# C/C++ flags PyTorch must not get: it picks its own C++ standard, and hiding inline symbols
# breaks programs that relied on them being exported by earlier builds.
_DROPPED_COMPILE_FLAGS = ("-fvisibility-inlines-hidden",)
# --as-needed / -dead_strip_dylibs drop BLAS/MKL libraries that are only used through symbols
# resolved at run time (osx-64 failed with "Symbol not found: _mkl_blas_caxpy").
_DROPPED_LINK_FLAGS = ("-Wl,--as-needed", "-Wl,-dead_strip_dylibs", "-dead_strip_dylibs")


def _clean_flags(flags: str) -> str:
    return " ".join(f for f in flags.split()
                    if not f.startswith("-std=") and f not in _DROPPED_COMPILE_FLAGS)


def _link_flags(flags: str, platform: str) -> str:
    kept = [f for f in flags.split() if f not in _DROPPED_LINK_FLAGS]
    # -z now resolves every symbol of libtorch_cuda at load time, so `import torch` fails on a
    # machine without libcuda.so; lazy binding defers that to the first CUDA call
    kept = [f.replace("-z,now", "-z,lazy") if f.startswith("-Wl,") else f for f in kept]
    if platform.startswith("linux") and "-Wl,-z,noexecstack" not in kept:
        # assembly objects without a .note.GNU-stack section would make the libraries ask for
        # an executable stack, which glibc 2.41 refuses to load
        kept.append("-Wl,-z,noexecstack")
    return " ".join(kept)


def build_environment(variant: Mapping[str, str], base: Mapping[str, str], *,
                      meminfo: Path = Path("/proc/meminfo"),
                      src_dir: Path | None = None) -> dict[str, str]:
    """The complete environment for PyTorch's build, for one variant (see module doc).
    `src_dir` (the source tree) is where the job-pool include lives; without it, no pool."""
    env = dict(base)
    # the arch lists come from the variant (or the FEEDSTOCK_ overrides), never from the shell
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    env.pop("PYTORCH_ROCM_ARCH", None)
    backend = gpu_backend(variant)
    platform = variant.get("target_platform", "linux-64")
    env.update(_gpu(variant, base, backend, platform))
    env.update(_blas(variant.get("blas_impl", "generic"), platform, base))
    env.update(_features(backend, platform))
    env.update(_jobs(variant, base, backend, meminfo, src_dir))
    env.update(compile_cache.cache_environment(base))
    env.update(_packaging(variant))
    for name in ("CFLAGS", "CXXFLAGS", "CPPFLAGS", "DEBUG_CXXFLAGS"):
        if name in env:
            env[name] = _clean_flags(env[name])
    for name in ("LDFLAGS", "LDFLAGS_LD"):
        if name in env:
            env[name] = _link_flags(env[name], platform)
    if backend == "rocm":  # ROCM_PATH, HIP_*, arch list, include order: see megabuild/rocm.py
        env.update(rocm_environment(variant, base, env))
    # the compilers' default on Linux, but aarch64 builds did not detect it
    env["_GLIBCXX_USE_CXX11_ABI"] = "1"
    env["CMAKE_BUILD_TYPE"] = "Release"
    env["CMAKE_GENERATOR"] = "Ninja"
    return env


def _gpu(variant: Mapping[str, str], base: Mapping[str, str], backend: str, platform: str) -> dict[str, str]:
    """USE_CUDA/USE_ROCM/USE_MAGMA, and for CUDA the arch list, nvcc flags, NCCL and where the
    toolkit is."""
    env = {"USE_CUDA": "1" if backend == "cuda" else "0", "USE_ROCM": "1" if backend == "rocm" else "0",
           "USE_MAGMA": "0"}
    if backend == "cuda":
        override = base.get("FEEDSTOCK_CUDA_ARCH_LIST", "")
        cuda_version = variant.get("cuda_compiler_version", "")
        arm_variant = variant.get("arm_variant_type", "sbsa")
        env["TORCH_CUDA_ARCH_LIST"] = override or cuda_arch_list(cuda_version, platform, arm_variant)
        check_cuda_archs(env["TORCH_CUDA_ARCH_LIST"], cuda_version)
        env["TORCH_NVCC_FLAGS"] = NVCC_FLAGS.get(major_minor(cuda_version), NVCC_FLAGS["12.9"])
        env["USE_NCCL"] = "1"
        env["USE_STATIC_NCCL"] = "0"
        env["USE_STATIC_CUDNN"] = "0"
        env.update(_cuda_locations(base, platform, arm_variant))
    return env


def _features(backend: str, platform: str) -> dict[str, str]:
    """The USE_*/BUILD_* switches: system libraries, what is off, what a platform needs."""
    # oneDNN: not for ROCm (MIOpen instead), and not on Apple silicon, where it was never
    # supported when MPS support was added
    env = {"USE_MKLDNN": "0" if backend == "rocm" or platform == "osx-arm64" else "1"}
    if not platform.endswith("-64"):
        env["USE_BREAKPAD"] = "0"  # breakpad does not build on aarch64/ppc64le
    if platform.startswith("osx"):
        env["USE_DISTRIBUTED"] = "1"  # off by default on macOS; libuv comes from host
    if backend == "cuda" and platform == "linux-aarch64":
        env["USE_PRIORITIZED_TEXT_FOR_LD"] = "1"  # libtorch_cuda outgrows aarch64 branch range
    for name in system_libraries(backend):
        env[name] = "1"
    for name in FEATURES_OFF:
        env[name] = "0"
    # libtorch must not ship test programs (~50 MB in bin/, test libraries in lib/), nor its own
    # protoc and google/protobuf headers, which would clobber the channel's libprotobuf
    env["BUILD_TEST"] = "0"
    env["INSTALL_TEST"] = "0"
    env["BUILD_CUSTOM_PROTOBUF"] = "OFF"
    return env


def _jobs(variant: Mapping[str, str], base: Mapping[str, str], backend: str, meminfo: Path,
          src_dir: Path | None) -> dict[str, str]:
    """MAX_JOBS from cores and memory (or FEEDSTOCK_MAX_JOBS), the heavy targets' pool, and the
    compilers' temporary folder inside the build's tree."""
    cpus = _positive_int("CPU_COUNT", variant.get("CPU_COUNT") or base.get("CPU_COUNT")
                         or str(os.cpu_count() or 1))
    if base.get("FEEDSTOCK_MAX_JOBS"):
        env = {"MAX_JOBS": str(_positive_int("FEEDSTOCK_MAX_JOBS", base["FEEDSTOCK_MAX_JOBS"]))}
    else:
        env = {"MAX_JOBS": str(max_jobs(cpus, mem_available_bytes(meminfo), backend != "cpu"))}
    if src_dir is not None:
        env.update(_heavy_pool(base, int(env["MAX_JOBS"]), mem_available_bytes(meminfo), src_dir))
        if not base.get("TMPDIR"):
            # the compilers' temporary files stay in the build's tree (made by its first command):
            # rattler-build runs the script without TMPDIR, and HIP's clang leaves a folder per
            # compile in /tmp, a shared machine's, which no build should fill
            env["TMPDIR"] = str(Path(src_dir) / TEMP_DIR_NAME)
    return env


def _packaging(variant: Mapping[str, str]) -> dict[str, str]:
    # setup.py's conda mode: no vendored runtime libraries copied into torch/lib
    env = {"PACKAGE_TYPE": "conda"}
    if variant.get("PKG_VERSION"):
        env["PYTORCH_BUILD_VERSION"] = variant["PKG_VERSION"]
    # never the conda build number: PyTorch would report 2.13.0.post300 (see module doc)
    env["PYTORCH_BUILD_NUMBER"] = "0"
    return env


def _heavy_pool(base: Mapping[str, str], jobs: int, mem_bytes: int | None,
                src_dir: Path) -> dict[str, str]:
    raw = base.get("FEEDSTOCK_HEAVY_JOBS", "").strip()
    try:
        override = int(raw) if raw else None
    except ValueError:
        raise MegabuildError(f"FEEDSTOCK_HEAVY_JOBS={raw!r} is not a whole number; set it to the "
                             "number of parallel heavy compiles, e.g. 1, or unset it") from None
    return job_pools.pool_environment(src_dir, job_pools.pool_size(jobs, mem_bytes, override))


def _blas(blas: str, platform: str, base: Mapping[str, str]) -> dict[str, str]:
    if blas == "mkl":
        if platform not in MKL_PLATFORMS:
            raise MegabuildError(f"blas_impl=mkl is not available on {platform}; use "
                                 "blas_impl=generic there")
        return {"BLAS": "MKL"}
    if blas == "generic":
        # PyTorch's "Generic" finds libblas alone; its OpenBLAS path, pointed at $PREFIX and
        # patched (0004, 0005), links lapack, cblas and blas, which is what the channel's
        # switchable netlib-interface packages provide, whatever implementation is behind them
        return {"BLAS": "OpenBLAS", "OpenBLAS_HOME": base.get("PREFIX", ""),
                # the dot-product convention cannot be probed when cross-compiling
                "PYTORCH_BLAS_USE_CBLAS_DOT": "ON"}
    raise MegabuildError(f"unknown blas_impl {blas!r}; expected 'mkl' or 'generic'")


def _cuda_locations(base: Mapping[str, str], platform: str, arm_variant: str = "sbsa") -> dict[str, str]:
    """Where the CUDA toolkit is for CMake: nvcc in $BUILD_PREFIX, headers and libraries in
    $PREFIX/targets/<arch> (patch 0006 lets these reach CMake and win over the location
    derived from nvcc, which would be the build prefix)."""
    prefix = base.get("PREFIX", "")
    build_prefix = base.get("BUILD_PREFIX", prefix)
    if platform not in CUDA_TARGET_DIRS:
        raise MegabuildError(f"no CUDA target directory known for {platform}; add it to "
                             "CUDA_TARGET_DIRS in megabuild/build_env.py")
    target = TEGRA_TARGET_DIR if platform == "linux-aarch64" and arm_variant == "tegra" \
        else CUDA_TARGET_DIRS[platform]
    return {
        "CUDAToolkit_BIN_DIR": f"{build_prefix}/bin",
        "CUDAToolkit_ROOT": prefix,
        "CUDAToolkit_ROOT_DIR": prefix,
        "CUDA_TOOLKIT_ROOT_DIR": prefix,
        "CUDAToolkit_TARGET_DIR": f"{prefix}/targets/{target}",
        "NCCL_ROOT_DIR": prefix,
        "NCCL_INCLUDE_DIR": f"{prefix}/include",
        "MAGMA_HOME": prefix,
        "FEEDSTOCK_CUDA_FROM_ENV": "1",
    }
