"""The ROCm part of the build environment: where ROCm is, and the known pitfalls of compiling
PyTorch for ROCm inside a conda environment, each handled here with the reason next to it.

`rocm_environment(variant, base, env)` returns the variables a ROCm variant adds to the
environment that `build_env.build_environment` computed (`env`: after its flag clean-ups):

- `HIP_PLATFORM=amd`: hipcc picks its back end at run time and, with nvcc installed (the
  CUDA toolkit is on many build hosts), chooses nvcc; `HIP_PLATFORM=nvidia` (or `nvcc`) in
  the caller's environment of a ROCm variant is an error, not something to override quietly;
- `ROCM_PATH`, `HIP_PATH`, `HIP_CLANG_PATH`: `ROCM_PATH` from the caller when set, else the
  first of `/opt/rocm` (AMD's images) and `/usr` (distribution packages) that has
  `include/hip/hip_runtime.h`; `HIP_CLANG_PATH` from the caller, else `$ROCM_PATH/llvm/bin`
  (ROCm's own LLVM) or the directory of the clang next to a distribution's hipcc; one error
  line when there is none;
- header search order ROCm -> conda prefix -> system: hipcc adds ROCm's include directory as
  a system directory (`-isystem`, and clang adds its own `-internal-isystem` for ROCm), which
  is searched after every `-I`, so a `-I$PREFIX/include` that CMake passes (conda's own
  packages live there) is searched first and a header in the prefix shadows ROCm's. `HIPCC_COMPILE_FLAGS_APPEND` (hipcc puts it
  before the caller's arguments) and `HIPFLAGS` (CMake's HIP language) get
  `-isystem $ROCM_PATH/include -isystem $PREFIX/include`; the compiler then drops the later
  `-I$PREFIX/include` as a duplicate of a system directory, so ROCm is searched first. The
  host flags (`CPPFLAGS`, `CFLAGS`, `CXXFLAGS`) get ROCm's directory in front of the prefix's.
  A ROCm under `/usr` *is* the system directory: it cannot be moved ahead (that breaks
  libstdc++'s `#include_next`), so nothing is added there;
- hipcc's clang uses the conda compiler's GCC (`$BUILD_PREFIX/lib/gcc/<triple>/<version>`,
  the triple from `$HOST`), not the system's: `--gcc-install-dir=` for clang 16 and later,
  `--gcc-toolchain=$BUILD_PREFIX` for older clang (which finds only triples it knows);
  otherwise host code compiled by hipcc sees the system's libstdc++ headers while the rest
  of PyTorch is compiled against conda's, and the two disagree at link or load time;
- OpenMP from ROCm's LLVM: clang's `-fopenmp` needs LLVM's `libomp`, and the conda prefix may
  hold another one (`llvm-openmp`); the LLVM of ROCm goes first in `CMAKE_PREFIX_PATH` (right
  after ROCm) and the hipcc link flags get `-L` and an rpath to its `lib`, so the library the
  code was compiled against is the one it loads;
- `PYTORCH_ROCM_ARCH` from the per-version table, `FEEDSTOCK_ROCM_ARCH` overrides; every
  target must be one the ROCm release supports (an unknown one is named in one line);
- version-specific switches (`ROCM_SWITCHES`), each with its reason.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from .errors import MegabuildError

# Where ROCm lives, in the order the driver looks: AMD's images, then distribution packages.
ROCM_LOCATIONS: tuple[str, ...] = ("/opt/rocm", "/usr")
ROCM_MARKER = Path("include") / "hip" / "hip_runtime.h"

# ROCm major.minor -> PYTORCH_ROCM_ARCH (the gfx targets the ROCm release supports).
ROCM_ARCH_LISTS: dict[str, str] = {
    "6.3": "gfx900;gfx906;gfx908;gfx90a;gfx942;gfx1030;gfx1100;gfx1101;gfx1102",
    "6.4": "gfx900;gfx906;gfx908;gfx90a;gfx942;gfx1030;gfx1100;gfx1101;gfx1102;gfx1200;gfx1201",
    "7.0": "gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1200;gfx1201",
    "7.1": "gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1102;gfx1200;gfx1201",
    "7.2": "gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1102;gfx1150;gfx1151;"
           "gfx1200;gfx1201",
}
# Target features a gfx name may carry (gfx90a:xnack-).
GFX_FEATURES = ("xnack+", "xnack-", "sramecc+", "sramecc-")

# ROCm major.minor -> {switch: (value, why)}. The same reasons hold for every release in the
# table today; a release that needs another value gets its own entry and its own reason.
_SWITCHES_6_7: dict[str, tuple[str, str]] = {
    "USE_MKLDNN": ("0", "oneDNN is PyTorch's CPU convolution path; on ROCm, GPU convolutions "
                   "go to MIOpen, and oneDNN's OpenMP threading (GNU libgomp from the conda "
                   "GCC) would share a process with ROCm LLVM's libomp"),
    "USE_FBGEMM": ("1", "FBGEMM is CPU-only (quantized x86 kernels) and compiled by the host "
                   "compiler; ROCm does not touch it"),
    "USE_FBGEMM_GENAI": ("0", "the FBGEMM GenAI GPU kernels target MI300/MI350 only "
                         "(gfx942/gfx950) and would fail or be empty for the other targets "
                         "of the list; turned on only when the list names nothing else"),
    "USE_KINETO": ("1", "the profiler's GPU tracing uses roctracer (ROCm 6.x) or "
                   "rocprofiler-sdk (ROCm 7.x), both part of the ROCm images"),
}
ROCM_SWITCHES: dict[str, dict[str, tuple[str, str]]] = {
    version: dict(_SWITCHES_6_7) for version in ROCM_ARCH_LISTS}
GENAI_TARGETS = {"gfx942", "gfx950"}


def major_minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2])


def _known_version(version: str) -> str:
    key = major_minor(version)
    if key not in ROCM_ARCH_LISTS:
        raise MegabuildError(f"unknown ROCm version {version!r}: no PYTORCH_ROCM_ARCH for it; "
                             f"known: {', '.join(sorted(ROCM_ARCH_LISTS))} (add it to "
                             "ROCM_ARCH_LISTS in megabuild/rocm.py, or set FEEDSTOCK_ROCM_ARCH)")
    return key


def rocm_arch_list(version: str) -> str:
    """The table's PYTORCH_ROCM_ARCH for a ROCm version (an unknown version is an error)."""
    return ROCM_ARCH_LISTS[_known_version(version)]


def validate_arch_list(value: str, version: str, source: str) -> str:
    """`value` as PyTorch wants it (`;`-separated), every target checked against the targets
    this ROCm release supports (all known releases' targets when the version is unknown)."""
    key = major_minor(version)
    supported = ROCM_ARCH_LISTS.get(key) or ";".join(ROCM_ARCH_LISTS.values())
    allowed = set(supported.split(";"))
    targets = [t for t in re.split(r"[;,\s]+", value.strip()) if t]
    if not targets:
        raise MegabuildError(f"{source} is empty; name at least one gfx target, e.g. gfx90a")
    for target in targets:
        name, *features = target.split(":")
        if name not in allowed or any(f not in GFX_FEATURES for f in features):
            release = f"ROCm {key}" if key in ROCM_ARCH_LISTS else "any known ROCm release"
            raise MegabuildError(f"unknown gfx target {target!r} in {source}: not supported by "
                                 f"{release} (supported: {' '.join(sorted(allowed))})")
    return ";".join(targets)


def check_hip_platform(base: Mapping[str, str]) -> None:
    """A ROCm variant compiles for AMD; a caller asking hipcc for NVIDIA made a mistake."""
    value = base.get("HIP_PLATFORM", "")
    if value and value != "amd":
        raise MegabuildError(f"HIP_PLATFORM={value} is set, but this is a ROCm variant, which "
                             "compiles for AMD GPUs; unset HIP_PLATFORM (the driver sets "
                             "HIP_PLATFORM=amd)")


def find_rocm(base: Mapping[str, str],
              locations: Sequence[str] = ROCM_LOCATIONS) -> Path:
    """ROCM_PATH: the caller's, checked, else the first location holding a ROCm install."""
    if base.get("ROCM_PATH"):
        root = Path(base["ROCM_PATH"])
        if not (root / ROCM_MARKER).is_file():
            raise MegabuildError(f"ROCM_PATH={root} is not a ROCm installation (no "
                                 f"{ROCM_MARKER} there); point ROCM_PATH at one, or unset it "
                                 f"to search {', '.join(locations)}")
        return root
    for location in locations:
        if (Path(location) / ROCM_MARKER).is_file():
            return Path(location)
    raise MegabuildError(f"no ROCm found: none of {', '.join(locations)} has {ROCM_MARKER}; "
                         "build ROCm variants in the ROCm image (ROCm under /opt/rocm), install "
                         "the distribution's HIP packages, or set ROCM_PATH")


def _has_clang(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("clang++*"))


def find_hip_clang(base: Mapping[str, str], rocm: Path) -> Path:
    """HIP_CLANG_PATH: the caller's, else ROCm's own LLVM, else the clang beside hipcc."""
    if base.get("HIP_CLANG_PATH"):
        path = Path(base["HIP_CLANG_PATH"])
        if not _has_clang(path):
            raise MegabuildError(f"HIP_CLANG_PATH={path} has no clang++; point it at the bin "
                                 "directory of ROCm's LLVM (e.g. /opt/rocm/llvm/bin) or unset it")
        return path
    for candidate in (rocm / "llvm" / "bin", rocm / "bin"):
        if _has_clang(candidate):
            return candidate
    raise MegabuildError(f"no clang++ for HIP in {rocm / 'llvm' / 'bin'} or {rocm / 'bin'}; "
                         "install ROCm's LLVM (the ROCm image has it) or set HIP_CLANG_PATH")


def _clang_executable(clang_dir: Path) -> Path:
    plain = clang_dir / "clang++"
    if plain.exists():
        return plain
    return sorted(clang_dir.glob("clang++*"))[0]


def clang_major(clang_dir: Path) -> int | None:
    """The major version of HIP's clang, from `clang++ --version` (None if it does not run)."""
    try:
        out = subprocess.run([str(_clang_executable(clang_dir)), "--version"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"clang version (\d+)", out)
    return int(match.group(1)) if match else None


def openmp_lib_dir(clang_dir: Path) -> Path | None:
    """The lib directory of the LLVM that HIP's clang belongs to, if it has libomp."""
    candidates = [clang_dir.parent / "lib"]
    clang = _clang_executable(clang_dir)
    candidates.append(clang.resolve().parent.parent / "lib")
    for lib in candidates:
        if (lib / "libomp.so").exists():
            return lib
    return None


def conda_gcc_install_dir(base: Mapping[str, str]) -> Path | None:
    """The conda compiler's GCC install dir: $BUILD_PREFIX/lib/gcc/$HOST/<version>."""
    build_prefix, triple = base.get("BUILD_PREFIX"), base.get("HOST")
    if not build_prefix or not triple:
        return None
    versions = sorted((Path(build_prefix) / "lib" / "gcc" / triple).glob("*/crtbegin.o"))
    return versions[-1].parent if versions else None


def gcc_toolchain_flags(gcc_dir: Path | None, clang_version: int | None) -> list[str]:
    if gcc_dir is None:
        return []
    if clang_version is not None and clang_version >= 16:
        return [f"--gcc-install-dir={gcc_dir}"]
    # <toolchain>/lib/gcc/<triple>/<version>: older clang takes the toolchain root
    return [f"--gcc-toolchain={gcc_dir.parents[3]}"]


def _is_system_include(path: Path) -> bool:
    return str(path).rstrip("/") in ("/usr/include", "/usr/local/include")


def _front_include(flags: str, rocm_include: Path, prefix_include: Path | None) -> str:
    """`flags` with `-isystem <rocm_include>` placed before the prefix's include directory."""
    words = flags.split()
    ours = ["-isystem", str(rocm_include)]
    for index, word in enumerate(words):
        joined = word in ("-isystem", "-I") and index + 1 < len(words)
        target = words[index + 1] if joined else word[2:] if word.startswith("-I") else None
        if prefix_include is not None and target == str(prefix_include):
            return " ".join(words[:index] + ours + words[index:])
    return " ".join(ours + words)


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def rocm_environment(variant: Mapping[str, str], base: Mapping[str, str],
                     env: Mapping[str, str], *,
                     locations: Sequence[str] = ROCM_LOCATIONS) -> dict[str, str]:
    """What a ROCm variant adds to `env` (see the module doc)."""
    check_hip_platform(base)
    version = variant.get("rocm_version", "")
    override = base.get("FEEDSTOCK_ROCM_ARCH", "")
    if override:
        arch = validate_arch_list(override, version, "FEEDSTOCK_ROCM_ARCH")
    else:
        arch = rocm_arch_list(version)
    rocm = find_rocm(base, locations)
    clang_dir = find_hip_clang(base, rocm)
    out: dict[str, str] = {"HIP_PLATFORM": "amd", "PYTORCH_ROCM_ARCH": arch,
                           "ROCM_PATH": str(rocm), "HIP_PATH": base.get("HIP_PATH", str(rocm)),
                           "HIP_CLANG_PATH": str(clang_dir)}

    switches = ROCM_SWITCHES.get(major_minor(version), _SWITCHES_6_7)
    for name, (value, _why) in switches.items():
        out[name] = value
    if set(arch.split(";")) <= GENAI_TARGETS:
        out["USE_FBGEMM_GENAI"] = "1"

    prefix = Path(base["PREFIX"]) if base.get("PREFIX") else None
    prefix_include = prefix / "include" if prefix else None
    rocm_include = rocm / "include"
    compile_flags: list[str] = []
    if not _is_system_include(rocm_include):
        compile_flags += ["-isystem", str(rocm_include)]
        for name in ("CPPFLAGS", "CFLAGS", "CXXFLAGS"):
            if env.get(name):
                out[name] = _front_include(env[name], rocm_include, prefix_include)
    if prefix_include is not None:
        compile_flags += ["-isystem", str(prefix_include)]
    gcc_dir = conda_gcc_install_dir(base)
    toolchain = gcc_toolchain_flags(gcc_dir, clang_major(clang_dir) if gcc_dir else None)
    compile_flags += toolchain

    link_flags = list(toolchain)
    omp = openmp_lib_dir(clang_dir)
    search = [str(rocm)]
    if omp is not None:
        link_flags += [f"-L{omp}", f"-Wl,-rpath,{omp}"]
        search.append(str(omp.parent))
    out["HIPCC_COMPILE_FLAGS_APPEND"] = _join(" ".join(compile_flags),
                                              base.get("HIPCC_COMPILE_FLAGS_APPEND", ""))
    out["HIPCC_LINK_FLAGS_APPEND"] = _join(" ".join(link_flags),
                                           base.get("HIPCC_LINK_FLAGS_APPEND", ""))
    out["HIPFLAGS"] = _join(" ".join(compile_flags), base.get("HIPFLAGS", ""))

    # ROCm's CMake packages, then its LLVM (OpenMP), then the prefix, then the caller's
    order = search + [base.get("PREFIX", "")] + base.get("CMAKE_PREFIX_PATH", "").split(os.pathsep)
    out["CMAKE_PREFIX_PATH"] = os.pathsep.join(dict.fromkeys(p for p in order if p))
    return out


def switch_reasons(version: str) -> dict[str, str]:
    """switch -> why, for the docs and the log."""
    switches = ROCM_SWITCHES.get(major_minor(version), _SWITCHES_6_7)
    return {name: f"{value}: {why}" for name, (value, why) in switches.items()}
