"""The linux-aarch64 arch lists, compiled for real: nvcc builds the test project's kernel for
each list and cuobjdump shows exactly the SASS and PTX the list names, nothing else."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from megabuild.build_env import (AARCH64_CUDA_ARCH_LISTS, NVCC_ARCHS, check_cuda_archs,
                                 cuda_arch_list)
from megabuild.errors import MegabuildError

pytestmark = [pytest.mark.compile]

KERNEL = Path(__file__).resolve().parents[1] / "support" / "megabuild_project" / "cuda" / "Kernels.cu"


def _cuobjdump() -> str:
    """cuobjdump on PATH, or the one of requirements-dev.txt's NVIDIA wheel; else a skip."""
    wheel = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / \
        "site-packages" / "nvidia" / "cu13" / "bin" / "cuobjdump"
    found = shutil.which("cuobjdump") or (str(wheel) if wheel.is_file() else None)
    if found is None:
        pytest.skip("cuobjdump not found: on PATH or from nvidia-cuda-cuobjdump (requirements-dev.txt)")
    return found


def _nvcc() -> tuple[str, str]:
    """nvcc on PATH and its major.minor, or a skip saying why."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH (e.g. /usr/local/cuda/bin)")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    return nvcc, re.search(r"release (\d+\.\d+)", out).group(1)


def gencode_flags(arch_list: str) -> list[str]:
    """PyTorch's meaning of TORCH_CUDA_ARCH_LIST: X.Y is SASS for sm_XY only; X.Y+PTX adds the
    compute_XY PTX, which newer GPUs compile at load time."""
    flags = []
    for entry in arch_list.split(";"):
        cc = entry.removesuffix("+PTX").replace(".", "")
        codes = f"sm_{cc},compute_{cc}" if entry.endswith("+PTX") else f"sm_{cc}"
        flags.append(f"-gencode=arch=compute_{cc},code=[{codes}]")
    return flags


def _listed(tool_output: str, suffix: str) -> set[str]:
    return set(re.findall(r"\.(sm_\d+)\." + suffix, tool_output))


@pytest.mark.parametrize("arm_variant, cuda", sorted(AARCH64_CUDA_ARCH_LISTS))
def test_aarch64_list_compiles_to_exactly_its_sass_and_ptx(tmp_path: Path, arm_variant: str,
                                                           cuda: str) -> None:
    nvcc, version = _nvcc()
    cuobjdump = _cuobjdump()
    archs = cuda_arch_list(cuda, "linux-aarch64", arm_variant)
    wanted = {entry.removesuffix("+PTX") for entry in archs.split(";")}
    if not wanted <= NVCC_ARCHS.get(version, frozenset()):
        pytest.skip(f"{arm_variant} {cuda} list {archs} needs an nvcc that builds all of it; "
                    f"this one is CUDA {version}")
    obj = tmp_path / "Kernels.o"
    subprocess.run([nvcc, "-c", str(KERNEL), "-o", str(obj), *gencode_flags(archs)],
                   check=True, capture_output=True, text=True)
    elf = subprocess.run([cuobjdump, "--list-elf", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    ptx = subprocess.run([cuobjdump, "--list-ptx", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    sass_expected = {"sm_" + a.replace(".", "") for a in wanted}
    ptx_expected = {"sm_" + e.removesuffix("+PTX").replace(".", "") for e in archs.split(";")
                    if e.endswith("+PTX")}
    assert _listed(elf, "cubin") == sass_expected, elf
    assert _listed(ptx, "ptx") == ptx_expected, ptx


def test_tegra_is_orin_only_and_cuda13_sbsa_covers_orin_thor_and_spark() -> None:
    assert cuda_arch_list("12.9", "linux-aarch64", "tegra") == "8.7+PTX"
    sbsa13 = set(cuda_arch_list("13.0", "linux-aarch64", "sbsa").split(";"))
    assert {"8.7", "11.0", "12.1"} <= {a.removesuffix("+PTX") for a in sbsa13}
    with pytest.raises(MegabuildError, match=r"unknown CUDA \(tegra\) version '13\.0'"):
        cuda_arch_list("13.0", "linux-aarch64", "tegra")


def test_nvcc_table_matches_the_real_nvcc() -> None:
    nvcc, version = _nvcc()
    if version not in NVCC_ARCHS:
        pytest.skip(f"no NVCC_ARCHS entry for this nvcc (CUDA {version})")
    out = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, check=True).stdout
    real = {f"{int(cc) // 10}.{int(cc) % 10}" for cc in re.findall(r"sm_(\d+)", out)}
    assert NVCC_ARCHS[version] == real


@pytest.mark.parametrize("suffix", ["a", "f"])
def test_the_suffixed_targets_we_accept_are_those_the_real_nvcc_builds(tmp_path, suffix: str) -> None:
    """Issue 35: `9.0a` on CUDA 12.9 was refused although nvcc builds sm_90a; issue 47: `10.0f`,
    CUDA 12.9's family-specific form, likewise. nvcc compiles an empty kernel for each `X.Ya` /
    `X.Yf` of its table: the ones check_cuda_archs accepts must build, the ones it refuses must
    not (a refused target fails in nvcc at once; each built one takes about 2 s)."""
    nvcc, version = _nvcc()
    if version not in NVCC_ARCHS:
        pytest.skip(f"no NVCC_ARCHS entry for this nvcc (CUDA {version})")
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    for base in sorted(NVCC_ARCHS[version], key=lambda a: tuple(map(int, a.split(".")))):
        arch = base + suffix
        cc = base.replace(".", "") + suffix
        built = subprocess.run([nvcc, "-c", str(tmp_path / "k.cu"), "-o", str(tmp_path / "k.o"),
                                f"-gencode=arch=compute_{cc},code=sm_{cc}"], capture_output=True, text=True)
        try:
            check_cuda_archs(arch, version)
            accepted = True
        except MegabuildError:
            accepted = False
        assert accepted == (built.returncode == 0), (arch, built.stderr[-500:])


def test_a_family_target_with_ptx_builds_as_pytorch_asks_for_it(tmp_path) -> None:
    """`12.0f+PTX`, accepted by check_cuda_archs, is the cubin and the PTX PyTorch's
    select_compute_arch.cmake asks nvcc for; the PTX is the family's (12.x GPUs only)."""
    nvcc, version = _nvcc()
    if version not in NVCC_ARCHS:
        pytest.skip(f"no NVCC_ARCHS entry for this nvcc (CUDA {version})")
    check_cuda_archs("10.0f;12.0f+PTX", version)
    built = subprocess.run([nvcc, "-c", str(KERNEL), "-o", str(tmp_path / "k.o"),
                            "-gencode=arch=compute_100f,code=sm_100f", "-gencode=arch=compute_120f,code=sm_120f",
                            "-gencode=arch=compute_120f,code=compute_120f"], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-500:]


@pytest.mark.parametrize("archs, cuda", [("9.0a;12.0a", "12.9"), ("9.0a;10.0a+PTX", "13.0")])
def test_arch_specific_targets_from_hopper_on_are_accepted(archs: str, cuda: str) -> None:
    check_cuda_archs(archs, cuda)


@pytest.mark.parametrize("archs, cuda", [("5.0;8.0", "13.0"), ("8.0;13.5+PTX", "12.9"), ("8.6a", "12.9"),
                                         ("9.0x", "13.0")])
def test_an_arch_the_cuda_cannot_build_is_one_line(archs: str, cuda: str) -> None:
    with pytest.raises(MegabuildError, match=f"CUDA {cuda} cannot build compute capability") as info:
        check_cuda_archs(archs, cuda)
    assert "\n" not in str(info.value)
    check_cuda_archs("7.5;12.0+PTX", cuda)  # every one buildable: no error


def test_x86_64_cuda13_list_is_upstreams_plus_ptx() -> None:
    # upstream's 2.14.1 cu130 wheel: sm_75, 80, 86, 90, 100, 120; 11.0 (Jetson Thor) is Arm-only
    assert cuda_arch_list("13.0", "linux-64") == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    assert "11.0" in cuda_arch_list("13.0", "linux-aarch64", "sbsa").split(";")
