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

import json
import shutil
from pathlib import Path

from common.hashing import sha256_of

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
# what a package build reads of the feedstock (the recipe and the driver, the job files and pins)
FEEDSTOCK_FILES = ("recipe", ".ci_support", "pinning.yaml", "conda-forge.yml")


class WrongNvcc(Exception):
    """This machine's nvcc is not the CUDA version of the wheel (the fixture skips)."""


def package_inputs_key(toolchain_session: dict, wheel: Path, cmakecache_dir: Path, feedstock_root: Path,
                       *extra: str) -> str:
    """What the packages of a wheel are made of: the wheel, the toolchain channel (its own key is
    in its folder's name), the feedstock they are built from (a copy the bump moved to the
    wheel's release, whose recipe names the stand-in tarball's hash; or this repository's recipe
    and job files), the wheel front end and this harness, the CMake caches.

    The feedstock is keyed by its files, not by the code that bumped them: an edit of the
    feedstock's tools that leaves the bumped recipe as it was keeps the machine's packages."""
    from tests.support.machine_cache import inputs_key
    from tests.support.paths import REPO_ROOT

    support, realbuild = REPO_ROOT / "tests" / "support", REPO_ROOT / "tests" / "realbuild"
    harness = [f for f in realbuild.glob("*.py") if not f.name.startswith("test_")]
    toolchain = toolchain_session["toolchain"]
    feedstock = inputs_key([feedstock_root / name for name in FEEDSTOCK_FILES], base=feedstock_root)
    return inputs_key([*harness, support / "real_wheel", support / "megabuild_project", support / "feedstock_copy.py",
                       support / "feedstock_cli.py", support / "megabuild_harness.py", support / "nvidia_wheels.py",
                       cmakecache_dir],
                      f"feedstock:{feedstock}", f"{wheel.name}:{wheel.stat().st_size}:{sha256_of(wheel)}",
                      str(toolchain.channel), *toolchain.packages,
                      json.dumps(toolchain_session["versions"], sort_keys=True), *extra)


def bumped_for_the_key(work: Path, wheel: Path, version: str) -> tuple[Path, Path]:
    """The feedstock copy bumped to `version` and its stand-in source, in this run's `work`:
    made before the machine's cache is asked, since the packages are keyed by the bumped files
    (seconds; the build copies both into the cache's entry)."""
    if work.exists():
        shutil.rmtree(work)
    return bumped_feedstock(work, wheel, version)


def copy_bumped(feedstock: Path, source: Path, work: Path) -> tuple[Path, Path]:
    """The bumped feedstock and its source copied into `work` (a cache entry's), where the build
    and later runs read them."""
    shutil.copytree(feedstock, work / "feedstock")
    shutil.copytree(source, work / "source" / source.name)
    return work / "feedstock", work / "source" / source.name


def keep_packages_only(output_dir: Path) -> None:
    """What a machine's entry keeps of a rattler-build output folder: the indexed packages and
    the log. Its staging cache (GBs of an unpacked wheel) and work folders go."""
    for name in ("build_cache", "bld", "src_cache", "test"):
        shutil.rmtree(output_dir / name, ignore_errors=True)


def cpu_wheel_packages(toolchain_session: dict, torch_wheel: Path, cmakecache_dir: Path) -> dict:
    """Build (once per machine and inputs: tests/support/machine_cache.py) and install (in this
    run's folder); keys: work, build_work, feedstock, recipe, build, prefix, python, log, channels."""
    from tests.support.machine_cache import cached_build

    toolchain = toolchain_session["toolchain"]
    variant = toolchain_session["variant"]((WHEEL_PYTHON,), toolchain_session["work"] / "variants" / "cpu-py311.yaml")

    bumped = bumped_for_the_key(toolchain_session["work"] / "wheel-bump", torch_wheel, TORCH_WHEEL_VERSION)

    def build_packages(entry: Path) -> dict:
        work = wheel_work_dir(entry / "wheel", torch_wheel, DISK_COPIES)
        feedstock, source = copy_bumped(*bumped, work)
        recipe = copy_recipe(work / "recipe", source, recipe_dir=feedstock / "recipe")
        override = write_frontend_override(work / "wheel_frontend_override.py", torch_wheel,
                                           cmakecache_dir, recipe_patches(feedstock / "recipe" / "meta.yaml"))
        build = build_feedstock(recipe, variant, toolchain.channel, work / "build_artifacts",
                                test="native", environ={"MEGABUILD_FRONTEND": str(override)})
        keep_packages_only(build.output_dir)
        return {"build_work": work, "feedstock": feedstock, "recipe": recipe, "build": build}

    key = package_inputs_key(toolchain_session, torch_wheel, cmakecache_dir, bumped[0], variant.read_text())
    built = cached_build("cpu-wheel-packages", key, build_packages)
    work = toolchain_session["work"] / "wheel"
    prefix = work / "elsewhere" / "env"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    install_from_channel(built["build"].output_dir, ["pytorch-cpu", f"python {WHEEL_PYTHON}.*", "pip"], prefix,
                         extra_channels=[toolchain.channel], cache=work / "pkgs")
    return {**built, "work": work, "prefix": prefix, "python": prefix / "bin" / "python",
            "log": (built["build"].output_dir / "rattler-build-log.txt"), "toolchain": toolchain,
            "channels": [built["build"].output_dir, toolchain.channel]}


def cuda_wheel_packages(toolchain_session: dict, cuda_torch_wheel: Path, cmakecache_dir: Path) -> dict:
    """Build (once per machine and inputs) and install (in this run's folder); keys: work,
    build_work, feedstock, recipe, variant, toolchain, nvidia, extras, build, prefix, records,
    python, channels, activations, wheel."""
    from tests.support.machine_cache import cached_build

    versions = toolchain_session["versions"]
    if nvcc_major_minor(versions) != CUDA:
        raise WrongNvcc(f"the downstream CUDA builds need nvcc {CUDA}, this machine has {versions['nvcc']}")
    toolchain = toolchain_session["toolchain"]
    variant = magma_only_variant(toolchain_session["variant"](
        (WHEEL_PYTHON,), toolchain_session["work"] / "variants" / "cuda130-py311.yaml", job=cuda_job(CUDA)))

    bumped = bumped_for_the_key(toolchain_session["work"] / "cuda-wheel-bump", cuda_torch_wheel, CUDA_VERSION)

    def build_packages(entry: Path) -> dict:
        work = wheel_work_dir(entry / "cuda-wheel", cuda_torch_wheel, DISK_COPIES)
        feedstock, source = copy_bumped(*bumped, work)
        recipe = copy_recipe(work / "recipe", source, recipe_dir=feedstock / "recipe")
        add_wheel_only_libraries(recipe)
        nvidia = work / "nvidia-channel"
        nvidia_channel(nvidia, work / "nvidia-work")
        shutil.rmtree(work / "nvidia-work", ignore_errors=True)   # the wheels, unpacked: the channel has them
        extras, activations = extras_channel(recipe, variant, [toolchain.channel, nvidia], versions,
                                             work / "extras-channel")
        override = write_frontend_override(work / "wheel_frontend_override.py", cuda_torch_wheel,
                                           cmakecache_dir, recipe_patches(feedstock / "recipe" / "meta.yaml"))
        build = build_feedstock(recipe, variant, toolchain.channel, work / "build_artifacts", test="native",
                                environ={"MEGABUILD_FRONTEND": str(override), "CONDA_OVERRIDE_CUDA": CUDA},
                                extra_channels=(nvidia, extras))
        keep_packages_only(build.output_dir)
        return {"build_work": work, "feedstock": feedstock, "recipe": recipe, "nvidia": nvidia, "extras": extras,
                "activations": activations, "build": build}

    key = package_inputs_key(toolchain_session, cuda_torch_wheel, cmakecache_dir, bumped[0], variant.read_text(), CUDA)
    built = cached_build("cuda-wheel-packages", key, build_packages)
    channels = [toolchain.channel, built["nvidia"], built["extras"]]
    work = toolchain_session["work"] / "cuda-wheel"
    prefix = work / "elsewhere" / "env"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    # cuda-nvrtc-dev: downstream CUDA builds link libnvrtc.so (torch's CMake config asks for it), as
    # the recipe's own test requirements say; conda-forge users install it the same way
    records = install_from_channel(built["build"].output_dir, ["pytorch-gpu", f"python {WHEEL_PYTHON}.*", "pip",
                                                               "cuda-nvrtc-dev"], prefix,
                                   cuda=CUDA, cache=work / "pkgs", extra_channels=channels)
    return {**built, "work": work, "variant": variant, "toolchain": toolchain, "prefix": prefix, "records": records,
            "python": prefix / "bin" / "python", "channels": [built["build"].output_dir, *channels],
            "wheel": cuda_torch_wheel}
