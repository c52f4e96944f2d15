"""Activation scripts of the CUDA libtorch package: TORCH_CUDA_ARCH_LIST for downstream builds.

torch.utils.cpp_extension compiles CUDA extensions for TORCH_CUDA_ARCH_LIST, or, when it is
unset, for the GPU it finds, and fails on a build machine without one (CI runners, conda-build
of a downstream package). The activation script sets it to the architectures this libtorch was
built for, unless the user already set it; the deactivation script removes it only when the
activation script set it, so a user's own value survives both.
"""
from __future__ import annotations

import shlex
from pathlib import Path

from .files import write_atomically

ACTIVATE = Path("etc") / "conda" / "activate.d" / "libtorch_activate.sh"
DEACTIVATE = Path("etc") / "conda" / "deactivate.d" / "libtorch_deactivate.sh"
# set by the activation script when it (not the user) set TORCH_CUDA_ARCH_LIST
MARKER = "LIBTORCH_FEEDSTOCK_SET_TORCH_CUDA_ARCH_LIST"


def extension_arch_list(arch_list: str) -> str:
    """The build's arch list as torch.utils.cpp_extension takes it. Its table of valid entries
    (2.13.0 and 2.14.1) has the arch-specific `9.0a` but no family-specific `10.0f`, which it
    refuses ("Unknown CUDA arch"), so `X.Yf` becomes `X.Y`: a cubin for X.Y runs on the same
    family's later GPUs too (10.0 on 10.3), only without the family's own instructions."""
    entries: list[str] = []
    for entry in arch_list.replace(" ", ";").split(";"):
        arch, ptx = (entry[:-4], "+PTX") if entry.endswith("+PTX") else (entry, "")
        plain = (arch[:-1] if arch.endswith("f") else arch) + ptx
        if plain and plain not in entries:
            entries.append(plain)
    return ";".join(entries)


def activation_scripts(arch_list: str) -> dict[Path, str]:
    """Relative path in the prefix -> script text, for a libtorch built for arch_list."""
    quoted = shlex.quote(extension_arch_list(arch_list))
    activate = (
        "# libtorch (pytorch-feedstock): the CUDA architectures this libtorch was built for,\n"
        "# used by torch.utils.cpp_extension when TORCH_CUDA_ARCH_LIST is not set already\n"
        'if [ -z "${TORCH_CUDA_ARCH_LIST+x}" ]; then\n'
        f"    export TORCH_CUDA_ARCH_LIST={quoted}\n"
        f"    export {MARKER}=1\n"
        "fi\n")
    deactivate = (
        "# libtorch (pytorch-feedstock): undo what libtorch_activate.sh set, nothing else\n"
        f'if [ "${{{MARKER}:-}}" = 1 ]; then\n'
        "    unset TORCH_CUDA_ARCH_LIST\n"
        f"    unset {MARKER}\n"
        "fi\n")
    return {ACTIVATE: activate, DEACTIVATE: deactivate}


def write_activation_scripts(prefix: Path, arch_list: str) -> list[Path]:
    written = []
    for relative, text in activation_scripts(arch_list).items():
        path = prefix / relative
        write_atomically(path, text.encode())
        written.append(path)
    return written
