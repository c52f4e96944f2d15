"""What the build driver (recipe/megabuild, standard library only) will do for a variant, asked
from the driver's own code so that the lint checks the recipe against the real thing."""
from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Mapping

from common.driver import DriverMissing, driver_module

from ...errors import FeedstockError


def load_driver_module(recipe_dir: Path, name: str) -> ModuleType:
    """megabuild.<name> from this feedstock's recipe/ (where conda-build runs it from), loaded
    the one way the tools load the driver (common.driver)."""
    try:
        return driver_module(recipe_dir.parent, name)
    except DriverMissing as err:
        raise FeedstockError(f"{err}; the lint checks the recipe against it") from None


def system_library_packages(recipe_dir: Path, variant: Mapping[str, str]) -> dict[str, str]:
    """`USE_SYSTEM_*` variable -> host package, as the driver sets them for this variant."""
    build_env = load_driver_module(recipe_dir, "build_env")
    return build_env.system_libraries(build_env.gpu_backend(variant))


def configuring_steps(recipe_dir: Path) -> tuple[str, ...]:
    return load_driver_module(recipe_dir, "steps").CONFIGURING_STEPS


def cmake_spec(recipe_dir: Path) -> str:
    """The `cmake` requirement the driver's range stands for (megabuild/tool_versions.py)."""
    return load_driver_module(recipe_dir, "tool_versions").CMAKE_SPEC


class DriverRefusal(FeedstockError):
    """The driver refuses a variant (its MegabuildError): the recipe asks for a build it cannot do."""


def reported_version(recipe_dir: Path, variant: Mapping[str, str], version: str,
                     build_number: int) -> tuple[str, str]:
    """(the version PyTorch will report, the PYTORCH_BUILD_NUMBER behind it) for a package
    version and conda build number, from the driver's real environment.

    Raises DriverRefusal with the driver's own message when it refuses the variant."""
    build_env = load_driver_module(recipe_dir, "build_env")
    errors = load_driver_module(recipe_dir, "errors")
    package = {"PKG_VERSION": version, "PKG_BUILDNUM": str(build_number), "CPU_COUNT": "1"}
    base = {"PREFIX": "/prefix", "BUILD_PREFIX": "/build"}
    try:
        try:
            env = build_env.build_environment({**variant, **package}, base)
        except errors.MegabuildError:
            if build_env.gpu_backend(variant) != "rocm":
                raise
            # the ROCm part looks for ROCm on this machine's disk; the version rules do not
            # depend on the backend, so ask for the same variant without a GPU, after checking
            # what of the ROCm part depends on the recipe alone (its version)
            load_driver_module(recipe_dir, "rocm").rocm_arch_list(variant.get("rocm_version", ""))
            cpu = {**variant, "gpu_backend": "cpu", "cuda_compiler_version": "None",
                   "rocm_version": "None"}
            env = build_env.build_environment({**cpu, **package}, base)
    except errors.MegabuildError as err:
        raise DriverRefusal(str(err)) from None
    return build_env.reported_version(env), env.get("PYTORCH_BUILD_NUMBER", "")
