"""The ROCm variant's first step: PyTorch's hipify converts the CUDA sources of the tree to HIP,
in place (as every ROCm build of PyTorch does), once per tree. Used by the split step and by the
develop step."""
from __future__ import annotations

from pathlib import Path

from . import log
from .build_commands import run_command
from .context import BuildContext
from .errors import MegabuildError

HIPIFY_MARKER = "megabuild-hipify.done"  # in the source tree: hipify converts that tree
HIPIFY_SCRIPT = Path("tools") / "amd_build" / "build_amd.py"


def run_hipify(ctx: BuildContext) -> None:
    """Convert CUDA sources to HIP once per source tree, before CMake (a marker in the tree
    records that it ran): a second split run or a pytorch step never hipifies again."""
    marker = ctx.src_dir / HIPIFY_MARKER
    if marker.exists():
        log.info(f"hipify: already done ({marker})")
        return
    script = ctx.src_dir / HIPIFY_SCRIPT
    if not script.is_file():
        raise MegabuildError(f"ROCm variant, but {script} is missing; SRC_DIR must be a "
                             "PyTorch source tree")
    with log.step("hipify sources"):
        run_command([ctx.python, HIPIFY_SCRIPT], ctx)
    marker.write_text("hipified\n")
