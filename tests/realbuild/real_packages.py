"""The feedstock's packages built from PyTorch's real binaries: what the session fixtures of
tests/realbuild/conftest.py build once and every real-build module (the packages' own checks,
the dependents) shares.

- `cpu_wheel_packages`: the real torch 2.13.0 cp311 CPU wheel as the payload of a copy of the
  feedstock's recipe.yaml bumped (back) to 2.13.0 by `python -m feedstock bump --allow-older`
  (libtorch, pytorch, pytorch-tests, pytorch-cpu), every output's tests run by rattler-build,
  pytorch-cpu installed by py-rattler into a fresh prefix.
- `cuda_wheel_packages`: a copy bumped to 2.14.1 (the recipe's own release: the bump only
  rewrites the stand-in's sha256), the CUDA 13.0 job built from the real cu130 wheel with
  NVIDIA's wheels repackaged under conda-forge's names, pytorch-gpu installed with `__cuda=13.0`.

Each raises ToolchainUnavailable where this machine lacks something (the fixtures skip).
"""
from __future__ import annotations

from pathlib import Path

from tests.realbuild.cuda import cuda_job, nvcc_major_minor
from tests.realbuild.cuda_wheel_job import add_wheel_only_libraries, extras_channel, magma_only_variant
from tests.realbuild.feedstock_build import build_feedstock, bumped_feedstock, copy_recipe
from tests.realbuild.install import install_from_channel
from tests.realbuild.session import wheel_work_dir
from tests.support.nvidia_wheels import nvidia_channel
from tests.support.paths import TORCH_WHEEL_VERSION
from tests.support.real_wheel.wheel_frontend import recipe_patches, write_frontend_override

WHEEL_PYTHON = "3.11"  # both wheels are cp311
CPU_PACKAGES = {"libtorch", "pytorch", "pytorch-cpu"}
CUDA_VERSION = "2.14.1"
CUDA = "13.0"
CUDA_TAG = "cuda" + CUDA.replace(".", "")
GPU_PACKAGES = {"libtorch", "libtorch-cuda-linalg", "pytorch", "pytorch-gpu"}
# the build's work folders, the host prefix, the test environments and the installed prefix
# each hold an unpacked copy of the wheel at some point (plus the NVIDIA packages for CUDA)
DISK_COPIES = 8


class WrongNvcc(Exception):
    """This machine's nvcc is not the CUDA version of the wheel (the fixture skips)."""


def cpu_wheel_packages(toolchain_session: dict, torch_wheel: Path, cmakecache_dir: Path) -> dict:
    """Build and install; keys: work, feedstock, recipe, build, prefix, python, log, channels."""
    work = wheel_work_dir(toolchain_session["work"] / "wheel", torch_wheel, DISK_COPIES)
    toolchain = toolchain_session["toolchain"]
    variant = toolchain_session["variant"]((WHEEL_PYTHON,), work / "variants" / "cpu-py311.yaml")
    feedstock, source = bumped_feedstock(work, torch_wheel, TORCH_WHEEL_VERSION)
    recipe = copy_recipe(work / "recipe", source, recipe_dir=feedstock / "recipe")
    override = write_frontend_override(work / "wheel_frontend_override.py", torch_wheel,
                                       cmakecache_dir, recipe_patches(feedstock / "recipe" / "meta.yaml"))
    build = build_feedstock(recipe, variant, toolchain.channel, work / "build_artifacts",
                            test="native", environ={"MEGABUILD_FRONTEND": str(override)})
    prefix = work / "elsewhere" / "env"
    install_from_channel(build.output_dir, ["pytorch-cpu", f"python {WHEEL_PYTHON}.*", "pip"], prefix,
                         extra_channels=[toolchain.channel], cache=work / "pkgs")
    return {"work": work, "feedstock": feedstock, "recipe": recipe, "build": build, "prefix": prefix,
            "python": prefix / "bin" / "python",
            "log": (build.output_dir / "rattler-build-log.txt"), "toolchain": toolchain,
            "channels": [build.output_dir, toolchain.channel]}


def cuda_wheel_packages(toolchain_session: dict, cuda_torch_wheel: Path, cmakecache_dir: Path) -> dict:
    """Build and install; keys: work, feedstock, recipe, variant, toolchain, nvidia, extras,
    build, prefix, records, python, channels, activations, wheel."""
    versions = toolchain_session["versions"]
    work = wheel_work_dir(toolchain_session["work"] / "cuda-wheel", cuda_torch_wheel, DISK_COPIES)
    if nvcc_major_minor(versions) != CUDA:
        raise WrongNvcc(f"the downstream CUDA builds need nvcc {CUDA}, this machine has {versions['nvcc']}")
    feedstock, source = bumped_feedstock(work, cuda_torch_wheel, CUDA_VERSION)
    recipe = copy_recipe(work / "recipe", source, recipe_dir=feedstock / "recipe")
    add_wheel_only_libraries(recipe)
    variant = magma_only_variant(toolchain_session["variant"](
        (WHEEL_PYTHON,), work / "variants" / "cuda130-py311.yaml", job=cuda_job(CUDA)))
    toolchain = toolchain_session["toolchain"]
    nvidia = work / "nvidia-channel"
    nvidia_channel(nvidia, work / "nvidia-work")
    extras, activations = extras_channel(recipe, variant, [toolchain.channel, nvidia], versions,
                                         work / "extras-channel")
    override = write_frontend_override(work / "wheel_frontend_override.py", cuda_torch_wheel,
                                       cmakecache_dir, recipe_patches(feedstock / "recipe" / "meta.yaml"))
    channels = [toolchain.channel, nvidia, extras]
    build = build_feedstock(recipe, variant, toolchain.channel, work / "build_artifacts", test="native",
                            environ={"MEGABUILD_FRONTEND": str(override), "CONDA_OVERRIDE_CUDA": CUDA},
                            extra_channels=(nvidia, extras))
    prefix = work / "elsewhere" / "env"
    # cuda-nvrtc-dev: downstream CUDA builds link libnvrtc.so (torch's CMake config asks for it), as
    # the recipe's own test requirements say; conda-forge users install it the same way
    records = install_from_channel(build.output_dir, ["pytorch-gpu", f"python {WHEEL_PYTHON}.*", "pip",
                                                      "cuda-nvrtc-dev"], prefix,
                                   cuda=CUDA, cache=work / "pkgs", extra_channels=channels)
    return {"work": work, "feedstock": feedstock, "recipe": recipe, "variant": variant, "toolchain": toolchain,
            "nvidia": nvidia, "extras": extras, "build": build, "prefix": prefix, "records": records,
            "python": prefix / "bin" / "python", "channels": [build.output_dir, *channels],
            "activations": activations, "wheel": cuda_torch_wheel}
