"""What the CUDA job's real build needs from this machine, and what nvcc put into a library.

`cuda_job` picks the generic-BLAS CUDA job of .ci_support whose CUDA version is this
machine's nvcc; `fatbin_archs` reads the `.nv_fatbin` section of a shared library (ELF parsed
here, no cuobjdump needed) and returns the PTX and cubin architectures nvcc compiled.
"""
from __future__ import annotations

import struct
from pathlib import Path

from tests.support.toolchain import REPO_ROOT, ToolchainUnavailable

FATBIN_MAGIC = 0xBA55ED50
FATBIN_KIND = {1: "ptx", 2: "cubin"}


def nvcc_major_minor(versions: dict[str, str]) -> str:
    """`13.0` for this machine's nvcc (on PATH; `versions` from machine_versions()), or
    ToolchainUnavailable."""
    nvcc = versions.get("nvcc")
    if not nvcc:
        raise ToolchainUnavailable("nvcc not on PATH: the CUDA job is built with the real nvcc "
                                   "(e.g. /usr/local/cuda/bin); the CUDA real-build tests skip")
    return ".".join(nvcc.split(".")[:2])


def cuda_job(cuda_version: str, blas: str = "generic") -> str:
    """The .ci_support job (file stem) for linux-64, this BLAS and CUDA version."""
    jobs = sorted((REPO_ROOT / ".ci_support").glob(
        f"linux_64_blas_impl{blas}*cuda_compiler_version{cuda_version}gpu_backendcuda*.yaml"))
    if not jobs:
        raise ToolchainUnavailable(f"no linux-64 {blas} CUDA job in .ci_support for this machine's "
                                   f"nvcc (CUDA {cuda_version})")
    return jobs[0].stem


def _elf_section(data: bytes, name: str) -> bytes | None:
    """The bytes of a named section of a little-endian ELF64 file, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        sh_name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return sh_name, offset, size

    _, str_off, _ = header(shstrndx)
    for i in range(shnum):
        sh_name, offset, size = header(i)
        end = data.index(b"\0", str_off + sh_name)
        if data[str_off + sh_name:end].decode() == name:
            return data[offset:offset + size]
    return None


def fatbin_archs(library: Path) -> set[tuple[str, int]]:
    """{("cubin", 75), ("ptx", 120), ...}: the device code nvcc embedded in `library`."""
    fatbin = _elf_section(library.read_bytes(), ".nv_fatbin")
    found: set[tuple[str, int]] = set()
    pos = 0
    while fatbin is not None and pos + 16 <= len(fatbin):
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", fatbin, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fat binaries are 8-byte aligned in the section
            continue
        entry, end = pos + header_size, pos + header_size + size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", fatbin, entry)
            arch, = struct.unpack_from("<I", fatbin, entry + 28)
            found.add((FATBIN_KIND.get(kind, str(kind)), arch))
            entry += entry_header + payload
        pos = end
    return found
