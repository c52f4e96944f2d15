"""build_environment(): the one function that decides what PyTorch's build sees, per variant."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from megabuild.build_env import (CUDA_ARCH_LISTS, ROCM_ARCH_LISTS, build_environment, check_cuda_archs,
                                 reported_version, system_libraries,
                                 mem_available_bytes)
from megabuild.context import BuildContext
from megabuild.errors import MegabuildError

GIB = 1024 ** 3
CPU = {"cuda_compiler_version": "None", "blas_impl": "generic", "target_platform": "linux-64",
       "use_magma": "false", "megabuild": "true", "CPU_COUNT": "4", "PKG_VERSION": "2.13.0",
       "PKG_BUILDNUM": "3"}
BASE = {"PATH": "/usr/bin:/bin", "HOME": "/root", "PREFIX": "/opt/host", "BUILD_PREFIX": "/opt/build"}


def meminfo(tmp_path: Path, gib: float) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       99999999 kB\nMemFree:         1000 kB\n"
                    f"MemAvailable:   {int(gib * 1024 * 1024)} kB\n")
    return path


def env_for(tmp_path: Path, base: dict | None = None, gib: float = 64, **variant: str) -> dict:
    return build_environment({**CPU, **variant}, {**BASE, **(base or {})},
                             meminfo=meminfo(tmp_path, gib))


def test_cpu_generic(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    assert (env["USE_CUDA"], env["USE_ROCM"], env["USE_MAGMA"]) == ("0", "0", "0")
    # generic BLAS goes through PyTorch's (patched) OpenBLAS path, rooted in the host prefix
    assert env["BLAS"] == "OpenBLAS" and env["OpenBLAS_HOME"] == BASE["PREFIX"]
    assert env["PYTORCH_BLAS_USE_CBLAS_DOT"] == "ON" and env["USE_MKLDNN"] == "1"
    assert "TORCH_CUDA_ARCH_LIST" not in env and "PYTORCH_ROCM_ARCH" not in env
    assert env["USE_SYSTEM_SLEEF"] == "1" and env["USE_SYSTEM_PYBIND11"] == "1"
    assert env["USE_SYSTEM_EIGEN_INSTALL"] == "1" and "USE_SYSTEM_NCCL" not in env
    # bundled, as in every proven build: no host package provides them
    for name in ("USE_SYSTEM_CPUINFO", "USE_SYSTEM_PTHREADPOOL", "USE_SYSTEM_FXDIV",
                 "USE_SYSTEM_PSIMD", "USE_SYSTEM_FP16", "USE_SYSTEM_FMT"):
        assert name not in env
    assert (env["USE_NUMA"], env["USE_ITT"], env["USE_CUFILE"]) == ("0", "0", "0")
    assert env["PACKAGE_TYPE"] == "conda" and env["INSTALL_TEST"] == "0"
    # no test binaries and no bundled protobuf (its headers would clobber libprotobuf's)
    assert env["BUILD_TEST"] == "0" and env["BUILD_CUSTOM_PROTOBUF"] == "OFF"
    assert env["PATH"] == BASE["PATH"] and env["CMAKE_GENERATOR"] == "Ninja"


@pytest.mark.parametrize("build_number", ["0", "1", "3", "100", "300"])
def test_pytorch_build_number_is_always_zero(tmp_path: Path, build_number: str) -> None:
    """conda's build number (300 on CUDA+MKL) must never reach PyTorch: it would report
    2.13.0.post300, so the recipe's version test and pip's metadata would disagree with conda."""
    env = env_for(tmp_path, PKG_BUILDNUM=build_number, blas_impl="mkl",
                  cuda_compiler_version="12.9", gpu_backend="cuda")
    assert env["PYTORCH_BUILD_VERSION"] == "2.13.0"
    assert env["PYTORCH_BUILD_NUMBER"] == "0"
    assert reported_version(env) == "2.13.0"


def test_reported_version_follows_pytorch_post_rule() -> None:
    assert reported_version({"PYTORCH_BUILD_VERSION": "2.13.0", "PYTORCH_BUILD_NUMBER": "1"}) == "2.13.0"
    assert reported_version({"PYTORCH_BUILD_VERSION": "2.13.0", "PYTORCH_BUILD_NUMBER": "300"}) == \
        "2.13.0.post300"


def test_link_flags_lazy_binding_and_no_exec_stack(tmp_path: Path) -> None:
    base = {"LDFLAGS": "-Wl,-O2 -Wl,--sort-common -Wl,--as-needed -Wl,-z,relro -Wl,-z,now "
                       "-Wl,--disable-new-dtags -Wl,--gc-sections",
            "CXXFLAGS": "-fvisibility-inlines-hidden -std=c++17 -fmessage-length=0 -O2"}
    env = env_for(tmp_path, base)
    flags = env["LDFLAGS"].split()
    assert "-Wl,-z,lazy" in flags and "-Wl,-z,now" not in flags
    assert "-Wl,--as-needed" not in flags and flags[-1] == "-Wl,-z,noexecstack"
    assert "-Wl,-z,relro" in flags and "-Wl,--gc-sections" in flags
    assert env["CXXFLAGS"] == "-fmessage-length=0 -O2"
    assert env["_GLIBCXX_USE_CXX11_ABI"] == "1"
    osx = env_for(tmp_path, {"LDFLAGS": "-Wl,-dead_strip_dylibs -Wl,-pie"}, target_platform="osx-arm64")
    assert osx["LDFLAGS"] == "-Wl,-pie"
    assert osx["USE_MKLDNN"] == "0" and osx["USE_DISTRIBUTED"] == "1"


def test_cuda_toolkit_locations_point_into_the_host_prefix(tmp_path: Path) -> None:
    env = env_for(tmp_path, cuda_compiler_version="13.0", gpu_backend="cuda")
    assert env["CUDAToolkit_TARGET_DIR"] == "/opt/host/targets/x86_64-linux"
    assert env["CUDAToolkit_BIN_DIR"] == "/opt/build/bin"
    assert env["CUDAToolkit_ROOT"] == env["CUDA_TOOLKIT_ROOT_DIR"] == "/opt/host"
    assert env["FEEDSTOCK_CUDA_FROM_ENV"] == "1" and env["USE_SYSTEM_NCCL"] == "1"
    assert env["USE_SYSTEM_NVTX"] == "1" and env["MAGMA_HOME"] == "/opt/host"
    assert "-compress-mode=size" in env["TORCH_NVCC_FLAGS"]
    assert "-compress-mode" not in env_for(tmp_path, cuda_compiler_version="12.9",
                                           gpu_backend="cuda")["TORCH_NVCC_FLAGS"]
    aarch = env_for(tmp_path, cuda_compiler_version="13.0", gpu_backend="cuda",
                    target_platform="linux-aarch64", blas_impl="generic")
    assert aarch["CUDAToolkit_TARGET_DIR"].endswith("/targets/sbsa-linux")
    assert aarch["USE_BREAKPAD"] == "0" and aarch["USE_PRIORITIZED_TEXT_FOR_LD"] == "1"


def test_system_libraries_name_their_packages() -> None:
    assert system_libraries("cpu") == {"USE_SYSTEM_SLEEF": "sleef", "USE_SYSTEM_PYBIND11": "pybind11",
                                       "USE_SYSTEM_EIGEN_INSTALL": "eigen"}
    assert system_libraries("cuda")["USE_SYSTEM_NVTX"] == "nvtx-c"
    assert "USE_SYSTEM_NCCL" not in system_libraries("rocm")


def test_stale_arch_lists_from_the_caller_do_not_leak_into_cpu(tmp_path: Path) -> None:
    env = env_for(tmp_path, {"TORCH_CUDA_ARCH_LIST": "8.0", "PYTORCH_ROCM_ARCH": "gfx90a"})
    assert "TORCH_CUDA_ARCH_LIST" not in env and "PYTORCH_ROCM_ARCH" not in env


@pytest.mark.parametrize("version, table", [("12.9", "12.9"), ("12.9.1", "12.9"), ("13.0", "13.0")])
def test_cuda_arch_list_per_version(tmp_path: Path, version: str, table: str) -> None:
    env = env_for(tmp_path, cuda_compiler_version=version)
    assert env["USE_CUDA"] == "1" and env["USE_ROCM"] == "0" and env["USE_MAGMA"] == "0"
    assert env["TORCH_CUDA_ARCH_LIST"] == CUDA_ARCH_LISTS[table]


def test_cuda13_drops_pre_turing_and_12_9_keeps_them() -> None:
    assert not {"5.0", "6.0", "6.1", "7.0"} & set(CUDA_ARCH_LISTS["13.0"].split(";"))
    assert {"5.0", "7.0", "9.0"} <= set(CUDA_ARCH_LISTS["12.9"].split(";"))


def test_cuda13_arch_list_is_accepted_by_the_real_nvcc() -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found on PATH")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    if "release 13.0" not in version:
        pytest.skip(f"nvcc is not CUDA 13.0: {version.strip().splitlines()[-1:]}")
    supported = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True).stdout
    for arch in CUDA_ARCH_LISTS["13.0"].split(";"):
        compute = "compute_" + arch.replace("+PTX", "").replace(".", "")
        assert compute in supported.split(), arch


def test_unknown_cuda_version_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(MegabuildError, match=r"unknown CUDA version '11\.8'.*12\.9, 13\.0") as info:
        env_for(tmp_path, cuda_compiler_version="11.8")
    assert "\n" not in str(info.value)


def test_cuda_arch_override(tmp_path: Path) -> None:
    env = env_for(tmp_path, {"FEEDSTOCK_CUDA_ARCH_LIST": "9.0"}, cuda_compiler_version="11.8")
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0"


# ROCm: tests/megabuild/test_rocm_env.py (the environment needs a ROCm installation to point at)


def test_every_gpu_version_of_the_recipe_has_an_arch_list(repo_root: Path) -> None:
    yaml = pytest.importorskip("yaml")
    config_file = repo_root / "recipe" / "conda_build_config.yaml"
    if not config_file.is_file():
        pytest.skip(f"{config_file} not written yet")
    config = yaml.safe_load(config_file.read_text())
    cuda = {str(v) for v in config.get("cuda_compiler_version", [])} - {"None"}
    rocm = {str(v) for v in config.get("rocm_version", [])} - {"None"}
    assert cuda, "the recipe lists no CUDA version"
    assert cuda <= set(CUDA_ARCH_LISTS), cuda - set(CUDA_ARCH_LISTS)
    assert rocm <= set(ROCM_ARCH_LISTS), rocm - set(ROCM_ARCH_LISTS)


def test_blas(tmp_path: Path) -> None:
    assert env_for(tmp_path, blas_impl="mkl")["BLAS"] == "MKL"
    with pytest.raises(MegabuildError, match="mkl is not available on linux-aarch64"):
        env_for(tmp_path, blas_impl="mkl", target_platform="linux-aarch64")
    with pytest.raises(MegabuildError, match="unknown blas_impl 'openblas'"):
        env_for(tmp_path, blas_impl="openblas")


@pytest.mark.parametrize("cpus, gib, cuda, jobs", [
    ("16", 8, "None", 2),     # memory-bound: 8 GiB / 3 GiB per C++ job
    ("16", 8, "13.0", 1),     # CUDA jobs need more
    ("16", 1, "None", 1),     # never below one
    ("4", 64, "None", 4),     # CPU-bound
    ("32", 96, "12.9", 16),
])
def test_max_jobs_follows_memory_and_cpus(tmp_path: Path, cpus, gib, cuda, jobs) -> None:
    env = env_for(tmp_path, gib=gib, CPU_COUNT=cpus, cuda_compiler_version=cuda)
    assert env["MAX_JOBS"] == str(jobs)


def test_max_jobs_override_and_bad_values(tmp_path: Path) -> None:
    assert env_for(tmp_path, {"FEEDSTOCK_MAX_JOBS": "7"}, gib=1)["MAX_JOBS"] == "7"
    with pytest.raises(MegabuildError, match="FEEDSTOCK_MAX_JOBS='lots'"):
        env_for(tmp_path, {"FEEDSTOCK_MAX_JOBS": "lots"})
    with pytest.raises(MegabuildError, match="CPU_COUNT='0'"):
        env_for(tmp_path, CPU_COUNT="0")


def test_max_jobs_without_meminfo_uses_cpus(tmp_path: Path) -> None:
    env = build_environment(CPU, BASE, meminfo=tmp_path / "absent")
    assert env["MAX_JOBS"] == "4"


def test_real_meminfo_is_read(tmp_path: Path) -> None:
    if not Path("/proc/meminfo").exists():
        pytest.skip("no /proc/meminfo on this system")
    assert (mem_available_bytes() or 0) > 0
    # one copy of the real file for both sides: MemAvailable moves while others compile
    copy = tmp_path / "meminfo"
    copy.write_bytes(Path("/proc/meminfo").read_bytes())
    available = mem_available_bytes(copy)
    assert available is not None and available > 0
    jobs = int(build_environment(CPU, BASE, meminfo=copy)["MAX_JOBS"])
    assert jobs == max(1, min(4, available // (3 * GIB)))


def test_ccache_launcher_only_when_found(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    ccache = tools / "ccache"
    ccache.write_text("#!/bin/sh\nexec \"$@\"\n")
    ccache.chmod(0o755)
    path = f"{tools}:/usr/bin:/bin"
    env = env_for(tmp_path, {"CCACHE_DIR": str(tmp_path / "cc"), "PATH": path})
    assert env["CMAKE_CXX_COMPILER_LAUNCHER"] == str(ccache)
    assert env["CMAKE_CUDA_COMPILER_LAUNCHER"] == str(ccache)
    assert env["CCACHE_DIR"] == str(tmp_path / "cc")   # the older spelling of a folder cache
    same = env_for(tmp_path, {"FEEDSTOCK_COMPILE_CACHE": str(tmp_path / "cc"), "PATH": path})
    assert {k: v for k, v in same.items() if k.startswith(("CCACHE_", "CMAKE_"))} == \
        {k: v for k, v in env.items() if k.startswith(("CCACHE_", "CMAKE_"))}
    assert "CMAKE_CXX_COMPILER_LAUNCHER" not in env_for(tmp_path, {"PATH": path})
    assert "CMAKE_CXX_COMPILER_LAUNCHER" not in env_for(
        tmp_path, {"CCACHE_DIR": str(tmp_path / "cc"), "PATH": str(tmp_path / "empty")})
    explicit = env_for(tmp_path, {"CCACHE_DIR": "x", "PATH": path,
                                  "CMAKE_CXX_COMPILER_LAUNCHER": "/opt/sccache"})
    assert explicit["CMAKE_CXX_COMPILER_LAUNCHER"] == "/opt/sccache"


def test_flag_cleanup(tmp_path: Path) -> None:
    env = env_for(tmp_path, {"CXXFLAGS": "-O2 -std=c++14 -fPIC", "CFLAGS": "-O2 -std=c99"})
    assert env["CXXFLAGS"] == "-O2 -fPIC" and env["CFLAGS"] == "-O2"


def test_same_environment_for_every_step(tmp_path: Path) -> None:
    """The libtorch and pytorch steps must see the same env, or everything rebuilds."""
    mem = meminfo(tmp_path, 32)
    envs = [build_environment({**CPU, "cuda_compiler_version": "12.9", "PKG_NAME": name},
                              BASE, meminfo=mem)
            for name in ("libtorch-split", "libtorch", "libtorch-cuda-linalg", "pytorch")]
    assert all(env == envs[0] for env in envs)


def test_base_is_not_modified(tmp_path: Path) -> None:
    base = {**BASE, "CXXFLAGS": "-std=c++14"}
    env_for(tmp_path, base)
    assert base == {**BASE, "CXXFLAGS": "-std=c++14"}


def test_context_from_environ(tmp_path: Path) -> None:
    environ = {**BASE, **CPU, "SRC_DIR": str(tmp_path / "src"), "PREFIX": str(tmp_path / "p"),
               "PYTHON": "/usr/bin/python3", "PKG_NAME": "pytorch", "UNRELATED": "x"}
    ctx = BuildContext.from_environ(environ)
    assert ctx.stage_dir == tmp_path / "src" / "megabuild-stage"
    assert ctx.variant["PKG_NAME"] == "pytorch" and "UNRELATED" not in ctx.variant
    assert ctx.env["UNRELATED"] == "x" and ctx.env["BLAS"] == "OpenBLAS"
    with pytest.raises(TypeError):
        ctx.env["X"] = "1"  # read-only
    with pytest.raises(MegabuildError, match="SRC_DIR, PREFIX not set"):
        BuildContext.from_environ({"PYTHON": "/usr/bin/python3", "PKG_NAME": "pytorch"})


@pytest.mark.parametrize("variant, cuda, archs, target", [
    ("tegra", "12.9", "8.7+PTX", "aarch64-linux"),
    ("sbsa", "12.9", CUDA_ARCH_LISTS["12.9"], "sbsa-linux"),
    ("sbsa", "13.0", "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX;12.1", "sbsa-linux"),
])
def test_aarch64_arch_list_and_toolkit_follow_arm_variant_type(tmp_path: Path, variant: str, cuda: str,
                                                               archs: str, target: str) -> None:
    env = env_for(tmp_path, cuda_compiler_version=cuda, gpu_backend="cuda",
                  target_platform="linux-aarch64", arm_variant_type=variant)
    assert env["TORCH_CUDA_ARCH_LIST"] == archs
    assert env["CUDAToolkit_TARGET_DIR"] == f"/opt/host/targets/{target}"


def test_arm_variant_type_reaches_the_driver_from_the_environment(tmp_path: Path) -> None:
    environ = {**BASE, **CPU, "SRC_DIR": str(tmp_path), "PYTHON": "/usr/bin/python3",
               "PKG_NAME": "libtorch-split", "gpu_backend": "cuda", "cuda_compiler_version": "12.9",
               "target_platform": "linux-aarch64", "arm_variant_type": "tegra"}
    assert BuildContext.from_environ(environ).env["TORCH_CUDA_ARCH_LIST"] == "8.7+PTX"


def test_an_override_the_cuda_cannot_build_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(MegabuildError, match=r"CUDA 13\.0 cannot build compute capability 5\.0 "
                                             r"\(it builds 7\.5 to 12\.1; arch-specific 9\.0a ") as info:
        env_for(tmp_path, {"FEEDSTOCK_CUDA_ARCH_LIST": "5.0;9.0"}, cuda_compiler_version="13.0",
                gpu_backend="cuda")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("cuda, archs", [("12.9", "10.0f;12.0f"), ("12.9", "8.0;10.1f;10.3f;12.1f+PTX"),
                                         ("13.0", "10.0f;12.0f"), ("13.0", "9.0a;11.0f;12.0f+PTX")])
def test_family_targets_from_cuda_12_9_reach_the_build(tmp_path: Path, cuda: str, archs: str) -> None:
    """CUDA 12.9's family-specific targets, spelled as TORCH_CUDA_ARCH_LIST takes them."""
    env = env_for(tmp_path, {"FEEDSTOCK_CUDA_ARCH_LIST": archs}, cuda_compiler_version=cuda,
                  gpu_backend="cuda")
    assert env["TORCH_CUDA_ARCH_LIST"] == archs


@pytest.mark.parametrize("cuda, arch, accepted", [
    ("13.0", "9.0f", "family-specific 10.0f 10.3f 11.0f 12.0f 12.1f"),   # Hopper has no family form
    ("13.0", "10.1f", "family-specific 10.0f 10.3f 11.0f 12.0f 12.1f"),  # 13.0 calls it 11.0
    ("12.9", "11.0f", "family-specific 10.0f 10.1f 10.3f 12.0f 12.1f"),
    ("12.9", "8.6f", "family-specific 10.0f 10.1f 10.3f 12.0f 12.1f"),
])
def test_a_family_target_nvcc_lacks_is_refused_with_what_it_has(tmp_path: Path, cuda: str, arch: str,
                                                                 accepted: str) -> None:
    with pytest.raises(MegabuildError, match=f"CUDA {cuda} cannot build compute capability {arch} ") as info:
        env_for(tmp_path, {"FEEDSTOCK_CUDA_ARCH_LIST": f"8.0;{arch}"}, cuda_compiler_version=cuda,
                gpu_backend="cuda")
    message = str(info.value)
    assert "\n" not in message and accepted in message and "FEEDSTOCK_CUDA_ARCH_LIST / --cuda-arch" in message


@pytest.mark.parametrize("cuda", ["12.8", "12.6.3", "11.8"])
def test_family_targets_before_cuda_12_9_are_refused(cuda: str) -> None:
    """No nvcc table for these versions (nvcc decides the rest), but `f` is known to be newer."""
    with pytest.raises(MegabuildError, match=f"CUDA {cuda[:4]} cannot build compute capability 10.0f: "
                                             r"nvcc has family-specific `f` targets from CUDA 12\.9 on"):
        check_cuda_archs("9.0;10.0f", cuda)
    check_cuda_archs("9.0;10.0", cuda)   # without the suffix: left to nvcc


def test_compilers_temporary_files_stay_in_the_build_tree(tmp_path: Path) -> None:
    """rattler-build runs the script without TMPDIR: the driver gives the compilers a folder in
    the source tree (HIP's clang left a Kernels-* folder per compile in the machine's /tmp);
    a TMPDIR the caller set is kept."""
    src = tmp_path / "src"
    mem = meminfo(tmp_path, 32)
    assert build_environment(CPU, BASE, meminfo=mem, src_dir=src)["TMPDIR"] == str(src / "megabuild-tmp")
    assert build_environment(CPU, {**BASE, "TMPDIR": "/scratch"}, meminfo=mem, src_dir=src)["TMPDIR"] == "/scratch"


def test_the_first_command_makes_the_temporary_folder(tmp_path: Path) -> None:
    """Made when the build runs its first command, not before: a tree the driver refuses first
    is left as it was."""
    from megabuild.build_commands import run_command

    environ = {**BASE, **CPU, "SRC_DIR": str(tmp_path / "src"), "PREFIX": str(tmp_path / "p"),
               "PYTHON": "/usr/bin/python3", "PKG_NAME": "pytorch"}
    (tmp_path / "src").mkdir()
    ctx = BuildContext.from_environ(environ)
    assert not (tmp_path / "src" / "megabuild-tmp").exists()
    run_command(["sh", "-c", 'test "$TMPDIR" = "$PWD/megabuild-tmp" && test -d "$TMPDIR"'], ctx)
    assert (tmp_path / "src" / "megabuild-tmp").is_dir()
