"""The ROCm job of .ci_support built for real from the PyTorch-shaped test project.

rattler-build builds the feedstock's recipe.yaml for the generic-BLAS ROCm 7.2 job, source
overridden to tests/support/megabuild_project with PyTorch's real hipify in it (unpacked from the
torch wheel, as tests/megabuild/test_rocm_build.py does), for one Python (the recipe's
split_python). The toolchain channel needs nothing beyond the cpu job's: the recipe asks for no
conda package on ROCm (its packages use the system ROCm, the build image's /opt/rocm; here
Debian's hipcc and HIP runtime under /usr, which the driver finds and passes as ROCM_PATH), and
its rendered requirements for this job are the cpu job's, name for name
(tests/feedstock/after_build/image/test_rocm_build_stage.py checks it). hipcc compiles the
project's hipified kernel into libtorch_hip for FEEDSTOCK_ROCM_ARCH.
"""
from __future__ import annotations

from pathlib import Path

from tests.realbuild.feedstock_build import FeedstockBuild, build_feedstock, copy_recipe, prepare_project_source
from tests.realbuild.session import machine_variant
from tests.support.paths import REPO_ROOT
from tests.support.toolchain import Toolchain, ToolchainUnavailable

ROCM_JOB = "linux_64_blas_implgenericc_stdlib_version2.28cuda_compiler_versionNonegpu_backendrocmrocm_version7.2"
PYTHON = "3.12"   # the recipe's split_python: the staging output builds with it in any case


def rocm_packages(toolchain: Toolchain, versions: dict[str, str], torch_wheel: Path, work: Path,
                  arch: str) -> dict:
    """Build the ROCm job's packages into work/build_artifacts for `arch` (a PYTORCH_ROCM_ARCH
    value); ToolchainUnavailable where hipcc or the wheel's hipify is missing.

    Keys: work, build (FeedstockBuild), channels (built, toolchain), arch, python, variant."""
    from tests.support.megabuild_harness import HarnessUnavailable, check_rocm_tools, install_hipify

    try:
        check_rocm_tools()
        source = prepare_project_source(work / "source", "scikit-build-core")
        install_hipify(source, torch_wheel)
    except HarnessUnavailable as err:
        raise ToolchainUnavailable(str(err)) from None
    recipe = copy_recipe(work / "recipe", source)
    variant = machine_variant(ROCM_JOB, (PYTHON,), versions, work / "variants" / f"{ROCM_JOB}.yaml")
    build: FeedstockBuild = build_feedstock(
        recipe, variant, toolchain.channel, work / "build_artifacts",
        environ={"FEEDSTOCK_MAX_JOBS": "2", "FEEDSTOCK_ROCM_ARCH": arch})
    return {"work": work, "build": build, "channels": [build.output_dir, toolchain.channel], "arch": arch,
            "python": PYTHON, "variant": variant, "recipe": recipe}


def rocm_packages_key(toolchain_session: dict, torch_wheel: Path, arch: str) -> str:
    """rocm_packages' inputs (real_packages.package_inputs_key: the recipe, the harness, the
    toolchain, the wheel whose hipify it uses) and this machine's hipcc."""
    import shutil
    import subprocess

    from tests.realbuild.real_packages import package_inputs_key

    hipcc = shutil.which("hipcc")
    version = subprocess.run([hipcc, "--version"], capture_output=True, text=True).stdout if hipcc else "no hipcc"
    return package_inputs_key(toolchain_session, torch_wheel, REPO_ROOT / "tests" / "fixtures" / "pytorch-cmakecache",
                              REPO_ROOT, arch, version, ROCM_JOB, PYTHON)
