"""The GPU arch list a config builds, from the driver's own tables (recipe/megabuild).

build-locally.py shows it in --dry-run and refuses a --cuda-arch the config's CUDA cannot
build before anything starts; the driver (stdlib only, like this package) is the one place
that knows the lists, so it is loaded from the feedstock's recipe/ instead of copied here.
"""
from __future__ import annotations

from pathlib import Path

from .configs import CiConfig
from common.driver import DriverMissing, driver_module
from .errors import EXIT_USAGE, LocalBuildError


def gpu_arch_list(config: CiConfig, feedstock_root: Path, override: str | None) -> str | None:
    """`TORCH_CUDA_ARCH_LIST` / `PYTORCH_ROCM_ARCH` of the build; None for CPU configs.
    A --cuda-arch that the config's CUDA cannot build, or a --rocm-arch target its ROCm does not
    support, is a LocalBuildError (one line)."""
    backend, version = config.gpu
    if backend == "cpu" or not version:
        return None
    try:
        build_env = driver_module(feedstock_root, "build_env")
    except DriverMissing:  # a tree without the driver: the build itself will say so
        return override
    error = driver_module(feedstock_root, "errors").MegabuildError
    if backend == "rocm":
        if override:  # checked here as --cuda-arch is, not first inside the container
            try:
                return driver_module(feedstock_root, "rocm").validate_arch_list(
                    override, version, "--rocm-arch")
            except error as exc:
                raise LocalBuildError(f"{config.name}: {exc}", EXIT_USAGE) from None
        try:
            return build_env.rocm_arch_list(version)
        except error:
            return None  # a version the tables lack: the driver names the fix
    if override:
        try:
            build_env.check_cuda_archs(override, version)
        except error as exc:
            raise LocalBuildError(f"{config.name}: {exc}", EXIT_USAGE) from None
        return override
    try:
        return build_env.cuda_arch_list(version, config.platform,
                                        config.first("arm_variant_type") or "sbsa")
    except error:
        return None


def check_arch_options_apply(backends: set[str], cuda_arch: str | None, rocm_arch: str | None) -> None:
    """--cuda-arch / --rocm-arch where no selected config has that backend would be ignored
    without a word: refused instead (the user meant another config)."""
    for flag, value, backend in (("--cuda-arch", cuda_arch, "cuda"), ("--rocm-arch", rocm_arch, "rocm")):
        if value and backend not in backends:
            raise LocalBuildError(f"{flag} applies to {backend.upper() if backend == 'cuda' else 'ROCm'} "
                                  f"configs, and none is selected (their backends: "
                                  f"{', '.join(sorted(backends))}); drop {flag} or select a "
                                  f"{backend} config", EXIT_USAGE)


def check_gpu_tests_apply(backends: set[str], gpu_tests: bool) -> None:
    """--gpu-tests where every selected config is a CPU one would be ignored without a word."""
    if gpu_tests and backends <= {"cpu"}:
        raise LocalBuildError("--gpu-tests gives GPU configs the host's GPU for their tests, and "
                              "every selected config is a CPU one; drop --gpu-tests or select a "
                              "cuda or rocm config", EXIT_USAGE)
