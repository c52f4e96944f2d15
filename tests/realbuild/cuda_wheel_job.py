"""The CUDA 13.0 job of a feedstock copy at PyTorch 2.14.1, ready for the real cu130 wheel.

- the copy itself comes from `feedstock_build.bumped_feedstock` (bumped to the wheel's version).
- `add_wheel_only_libraries`: the wheel links cuFile, cuSPARSELt and NVSHMEM, which the
  recipe leaves out (recipe/README.md, parity table): their -dev packages join the
  copy's CUDA host lists so that run_exports make libtorch depend on them.
- `magma_only_variant`: the wheel carries one libtorch_cuda_linalg (MAGMA, linked
  statically), so the job packages that flavour only.
- `extras_channel`: what no other channel has for this job (the nvcc activation, stand-ins
  for headers-only or unlinked names such as cuda-driver-dev, libmagma-devel, triton).
"""
from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.toolchain import build_outputs, machine_outputs, needed_requirements

from .feedstock_build import channel_names

WHEEL_ONLY_DEV = ("libcufile-dev", "libcusparselt-dev", "libnvshmem-dev")
_HOST_ANCHOR = "- nvtx-c\n"


def add_wheel_only_libraries(recipe: Path) -> None:
    text = recipe.read_text()
    count = text.count(_HOST_ANCHOR)
    if count != 3:  # the staging, libtorch and pytorch CUDA host lists
        raise ValueError(f"{recipe}: expected 3 CUDA host lists ending in nvtx-c, found {count}")
    lines = []
    for line in text.splitlines(keepends=True):
        lines.append(line)
        if line.endswith(_HOST_ANCHOR):
            indent = line[: len(line) - len(line.lstrip())]
            lines += [f"{indent}- {name}\n" for name in WHEEL_ONLY_DEV]
    recipe.write_text("".join(lines))


def magma_only_variant(variant: Path) -> Path:
    data = yaml.safe_load(variant.read_text())
    data["use_magma"] = ["true"]
    variant.write_text(yaml.safe_dump(data, sort_keys=True))
    return variant


def extras_channel(recipe: Path, variant: Path, channels: list[Path], versions: dict[str, str],
                   dest: Path) -> tuple[Path, dict[str, dict[str, str]]]:
    """Build the job's remaining names into dest; returns it and the compilers' exports."""
    have = channel_names(*channels)
    needed = needed_requirements(recipe, variant)
    outputs, activations = machine_outputs(needed, versions, skip=have)
    build_outputs(dest.parent / "extras-recipes", [("cuda-wheel-extras", outputs)], dest)
    return dest, activations
