"""NVIDIA's CUDA runtime wheels repackaged as conda packages under conda-forge's names.

PyTorch's CUDA wheel finds cuBLAS, cuDNN, NCCL, ... through an RPATH into
`site-packages/nvidia/*/lib`; conda-forge ships the same libraries as `libcublas`, `libcudnn`,
`nccl`, ... with the files in `$PREFIX/lib`, and `-dev` packages whose run_exports make
anything linked against them depend on the runtime package. `nvidia_channel` builds that shape
with rattler-build from the wheels pip's local index serves (tests/realbuild/nvidia-requirements.txt):

- a runtime package per wheel: the wheel's `nvidia/<dir>/lib/*` files in `$PREFIX/lib`, run
  requirements read from their ELF NEEDED entries (libcusolver needs libcublas, ...);
- a `-dev` package per runtime package the recipe's host lists name: the unversioned
  `lib<name>.so` link and `run_exports` on the runtime package.

The libraries are NVIDIA's binaries, untouched but for their run paths: the wheels' entries
into sibling wheels (`$ORIGIN/../../cublas/lib`) would point outside `$PREFIX`, so only
`$ORIGIN` is kept, as conda-forge's packages have it; no relinking, no prefix scan. Packing gigabytes
is slow, so the packages are cached outside the repository (`cache_root()`), keyed by the
sha256 of every input wheel and of this file, and packed with fast zstd compression.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tests.support.real_wheel.cuda_wheel import keep_rpath_entries
from tests.support.paths import cache_root
from tests.support.toolchain import ToolchainUnavailable, build_outputs, recipe_output, index_channel

REQUIREMENTS = Path(__file__).resolve().parents[1] / "realbuild" / "nvidia-requirements.txt"
# PyPI wheel -> (conda-forge runtime name, conda-forge -dev name or None)
CONDA_NAMES: dict[str, tuple[str, str | None]] = {
    "nvidia-cuda-runtime": ("cuda-cudart", "cuda-cudart-dev"),
    "nvidia-cublas": ("libcublas", "libcublas-dev"),
    "nvidia-cudnn-cu13": ("libcudnn", "libcudnn-dev"),
    "nvidia-nccl-cu13": ("nccl", None),  # conda-forge's nccl is runtime and -dev in one
    "nvidia-cusparse": ("libcusparse", "libcusparse-dev"),
    "nvidia-cufft": ("libcufft", "libcufft-dev"),
    "nvidia-curand": ("libcurand", "libcurand-dev"),
    "nvidia-cusolver": ("libcusolver", "libcusolver-dev"),
    "nvidia-cufile": ("libcufile", "libcufile-dev"),
    "nvidia-cuda-nvrtc": ("cuda-nvrtc", "cuda-nvrtc-dev"),
    "nvidia-cusparselt-cu13": ("libcusparselt", "libcusparselt-dev"),
    "nvidia-nvshmem-cu13": ("libnvshmem", "libnvshmem-dev"),
    "nvidia-nvjitlink": ("libnvjitlink", "libnvjitlink-dev"),
    "nvidia-cuda-cupti": ("cuda-cupti", "cuda-cupti-dev"),
    "nvidia-nvtx": ("cuda-nvtx", "cuda-nvtx-dev"),
}
BUILD_STRING = "pypi_wheel_0"
# zstd level for `.conda`: the fastest rattler-build accepts that still compresses
PACKAGE_FORMAT = "conda:1"


@dataclass(frozen=True)
class NvidiaWheel:
    wheel: Path
    pypi_name: str
    version: str

    @property
    def runtime(self) -> str:
        return CONDA_NAMES[self.pypi_name][0]

    @property
    def dev(self) -> str | None:
        return CONDA_NAMES[self.pypi_name][1]


def pinned_wheels() -> dict[str, str]:
    """PyPI name -> version, from nvidia-requirements.txt."""
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def download_pinned(requirements: Path, dest: Path) -> None:
    """pip download of a requirements file's pinned wheels, no dependencies (PyPI, or pip's
    configured index); ToolchainUnavailable naming the file otherwise."""
    dest.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                           "--disable-pip-version-check", "--quiet", "-d", str(dest), "-r", str(requirements)],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise ToolchainUnavailable(f"the wheels of {requirements.name} are not available: {last}")


def download_nvidia_wheels(dest: Path) -> list[NvidiaWheel]:
    """pip download of the pinned wheels (no dependencies; pip's local index serves them)."""
    download_pinned(REQUIREMENTS, dest)
    found = []
    for name, version in pinned_wheels().items():
        stem = name.replace("-", "_")
        wheels = sorted(dest.glob(f"{stem}-{version}-*.whl"))
        if not wheels:
            raise ToolchainUnavailable(f"pip download left no {stem}-{version} wheel in {dest}")
        found.append(NvidiaWheel(wheels[0], name, version))
    return found


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def inputs_key(generator: Path, files: list[Path]) -> str:
    """sha256 over a package generator's source and every input file's name and sha256."""
    digest = hashlib.sha256(generator.read_bytes())
    for path in sorted(files, key=lambda p: p.name):
        digest.update(f"{path.name} {_sha256(path)}\n".encode())
    return digest.hexdigest()


def cache_key(wheels: list[NvidiaWheel]) -> str:
    """sha256 over every input wheel's sha256 and this generator's source."""
    return inputs_key(Path(__file__), [item.wheel for item in wheels])


def extract_libraries(item: NvidiaWheel, dest: Path) -> list[Path]:
    """The wheel's nvidia/<dir>/lib/* files, unpacked into dest (flat, as in $PREFIX/lib)."""
    dest.mkdir(parents=True, exist_ok=True)
    files = []
    with zipfile.ZipFile(item.wheel) as zf:
        for member in zf.infolist():
            parts = member.filename.split("/")
            if len(parts) == 4 and parts[0] == "nvidia" and parts[2] == "lib" and parts[3]:
                target = dest / parts[3]
                with zf.open(member) as src, target.open("wb") as out:
                    shutil.copyfileobj(src, out, 16 << 20)
                os.chmod(target, 0o755)
                trim_run_path(target)
                files.append(target)
    if not files:
        raise ToolchainUnavailable(f"{item.wheel.name} has no nvidia/*/lib/ files")
    return files


def trim_run_path(library: Path) -> None:
    """Keep only `$ORIGIN` of an ELF library's RPATH/RUNPATH (everything sits in $PREFIX/lib)."""
    with library.open("rb") as fh:
        if fh.read(4) != b"\x7fELF":
            return
    keep_rpath_entries(library, lambda entry: entry.rstrip("/") == "$ORIGIN")


def needed_sonames(library: Path) -> set[str]:
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))


def package_outputs(wheels: list[NvidiaWheel], extracted: dict[str, list[Path]]) -> list[dict]:
    """The recipe outputs: one runtime package per wheel, one -dev package per -dev name."""
    provider = {lib.name: item for item in wheels for lib in extracted[item.pypi_name]}
    untouched = {"dynamic_linking": {"binary_relocation": False}, "prefix_detection": {"ignore": True}}
    outputs = []
    for item in wheels:
        libs = extracted[item.pypi_name]
        deps = sorted({f"{provider[so].runtime} >={provider[so].version}"
                       for lib in libs for so in needed_sonames(lib)
                       if so in provider and provider[so] is not item})
        source = libs[0].parent
        out = recipe_output(item.runtime, item.version, BUILD_STRING,
                      ['mkdir -p "$PREFIX/lib"',
                       f'cp -al "{source}/." "$PREFIX/lib/" 2>/dev/null || cp -a "{source}/." "$PREFIX/lib/"'],
                      f"NVIDIA's {item.wheel.name} repackaged: its libraries in $PREFIX/lib",
                      run=deps or None, extra_build=untouched)
        if item.dev is None:  # a runtime+dev package (nccl): linking against it pins it
            out.setdefault("requirements", {})["run_exports"] = {"weak": [f"{item.runtime} >={item.version}"]}
        outputs.append(out)
        if item.dev is None:
            continue
        links = [f'ln -s "{lib.name}" "$PREFIX/lib/{lib.name.split(".so")[0]}.so"'
                 for lib in libs if re.fullmatch(r"lib[^.]+\.so\.\d+", lib.name)]
        dev = recipe_output(item.dev, item.version, BUILD_STRING, ['mkdir -p "$PREFIX/lib"', *links],
                      f"link-time files of {item.runtime} (from {item.wheel.name}); run_exports pin it",
                      run=[f"{item.runtime} =={item.version}"], extra_build=untouched)
        dev["requirements"]["run_exports"] = {"weak": [f"{item.runtime} >={item.version}"]}
        outputs.append(dev)
    return outputs


def _place(packages: list[Path], channel: Path) -> list[Path]:
    """Hard-link (or copy) cached packages into channel/linux-64."""
    subdir = channel / "linux-64"
    subdir.mkdir(parents=True, exist_ok=True)
    placed = []
    for package in packages:
        target = subdir / package.name
        if not target.exists():
            try:
                os.link(package, target)
            except OSError:
                shutil.copy2(package, target)
        placed.append(target)
    return placed


def cached_packages(kind: str, key: str, channel: Path, work: Path, recipe: str,
                    outputs: Callable[[], list[dict]], label: str, log=print) -> list[Path]:
    """The packages of `recipe` with outputs() in `channel` (indexed): built once per key into
    cache_root()/kind/ (a complete cache entry or none) and placed from there."""
    cached = cache_root() / kind / key[:24]
    if not (cached / "complete").is_file():
        log(f"{label}: packaging into {cached} (cache miss)")
        tmp = cached.with_name(f"{cached.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        build_outputs(work / "recipes", [(recipe, outputs())], tmp, log, package_format=PACKAGE_FORMAT)
        for leftover in ("bld", "src_cache", "build_cache"):
            shutil.rmtree(tmp / leftover, ignore_errors=True)
        (tmp / "complete").write_text(f"{key}\n")
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(cached, ignore_errors=True)
        os.replace(tmp, cached)  # a complete cache entry or none
    else:
        log(f"{label}: packages from the cache {cached}")
    placed = _place(sorted(cached.glob("linux-64/*.conda")), channel)
    index_channel(channel)
    return placed


def nvidia_channel(channel: Path, work: Path, log=print) -> list[Path]:
    """The repackaged NVIDIA packages in `channel` (indexed), from the cache when the same
    wheels were packaged before; returns the package files."""
    wheels = download_nvidia_wheels(work / "wheels")
    unknown = [w.pypi_name for w in wheels if w.pypi_name not in CONDA_NAMES]
    if unknown:
        raise ToolchainUnavailable(f"no conda-forge name known for {', '.join(unknown)} (CONDA_NAMES)")

    def outputs() -> list[dict]:
        extracted = {w.pypi_name: extract_libraries(w, work / "extracted" / w.pypi_name) for w in wheels}
        return package_outputs(wheels, extracted)

    try:
        return cached_packages("nvidia-conda", cache_key(wheels), channel, work, "nvidia-wheels", outputs,
                               f"nvidia: {len(wheels)} wheels", log)
    finally:
        shutil.rmtree(work / "extracted", ignore_errors=True)
