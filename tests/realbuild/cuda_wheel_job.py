"""The CUDA 13.0 job of a feedstock copy bumped to PyTorch 2.14.1, ready for the real cu130 wheel.

- `bumped_feedstock`: a copy of the feedstock bumped by `python -m feedstock bump` to the
  wheel's version. The source is a stand-in tarball (the PyTorch-shaped test project packed
  as `pytorch-v<version>/`): the wheel front end supplies the payload, so the release tarball,
  which is not reachable here, is not needed; `--skip-patch-check` for the same reason (the
  front end applies the patches to the files the wheel carries).
- `add_wheel_only_libraries`: the wheel links cuFile, cuSPARSELt and NVSHMEM, which the
  2.13.0 recipe leaves out (recipe/README.md, parity table): their -dev packages join the
  copy's CUDA host lists so that run_exports make libtorch depend on them.
- `magma_only_variant`: the wheel carries one libtorch_cuda_linalg (MAGMA, linked
  statically), so the job packages that flavour only.
- `extras_channel`: what no other channel has for this job (the nvcc activation, stand-ins
  for headers-only or unlinked names such as cuda-driver-dev, libmagma-devel, triton).
"""
from __future__ import annotations

import tarfile
from pathlib import Path

import yaml

from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.feedstock_copy import copy_feedstock
from tests.support.toolchain import build_outputs, machine_outputs, needed_requirements

from .feedstock_build import channel_names, prepare_project_source

WHEEL_ONLY_DEV = ("libcufile-dev", "libcusparselt-dev", "libnvshmem-dev")
_HOST_ANCHOR = "- nvtx-c\n"


def bumped_feedstock(work: Path, wheel: Path, version: str) -> tuple[Path, Path]:
    """(feedstock copy bumped to `version`, the stand-in source tree the tarball was made of)."""
    source = prepare_project_source(work / "source" / f"pytorch-v{version}")
    (source / "STAND-IN.txt").write_text(
        f"Stand-in for the pytorch-v{version} release tarball: the feedstock's PyTorch-shaped test "
        f"project. The payload comes from {wheel.name} through the wheel front end.\n")
    tarball = work / f"pytorch-v{version}.tar.gz"
    with tarfile.open(tarball, "w:gz", compresslevel=1) as tar:
        tar.add(source, arcname=source.name)
    root = copy_feedstock(work / "feedstock")
    proc = run_feedstock_cli("bump", version, "--source", str(tarball), "--wheel", str(wheel),
                             "--skip-patch-check", root=root)
    if proc.returncode != 0:
        raise RuntimeError(f"bump failed: {proc.stdout}{proc.stderr}")
    return root, source


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
