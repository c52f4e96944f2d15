"""build-locally.py against this repository itself: --help always, the real .ci_support/ when
it has been generated (python -m feedstock rerender)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.support.build_locally import REPO_ROOT, as_strings
from localbuild import ci_yaml

CI_SUPPORT = REPO_ROOT / ".ci_support"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", str(REPO_ROOT / "build-locally.py"), *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def real_configs() -> list:
    configs = sorted(p for p in CI_SUPPORT.glob("*.yaml") if not p.name.startswith("clobber_"))
    if not configs:
        pytest.skip(f"{CI_SUPPORT} has no configs yet (generate with `python -m feedstock rerender`)")
    return configs


def test_help_in_the_repository():
    proc = run("--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage: build-locally.py" in proc.stdout


def test_real_configs_parse_like_pyyaml():
    for path in real_configs():
        text = path.read_text()
        assert ci_yaml.parse(text, str(path)).data == as_strings(yaml.safe_load(text)), path.name


def test_real_configs_list_and_dry_run():
    configs = real_configs()
    proc = run("--list")
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()] == [p.stem for p in configs]
    assert all("GB disk" in line for line in proc.stdout.splitlines())
    proc = run("--dry-run", "--all")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("== [") == len(configs)
    linux = [p for p in configs if p.name.startswith("linux")]
    other_arch = proc.stdout.count("skipped:      needs a linux-")   # aarch64 image on x86_64
    assert proc.stdout.count("command:      docker run ") + other_arch == len(linux)
    assert "dry run: nothing was started or written" in proc.stdout


AARCH64_CUDA = {  # job -> the arch list its dry-run must show (recipe/README.md gives reasons)
    "linux_aarch64_arm_variant_typesbsac_stdlib_version2.17cuda_compiler_version12.9gpu_backendcuda":
        "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    "linux_aarch64_arm_variant_typesbsac_stdlib_version2.28cuda_compiler_version13.0gpu_backendcuda":
        "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX;12.1",
    "linux_aarch64_arm_variant_typetegrac_stdlib_version2.34cuda_compiler_version12.9gpu_backendcuda":
        "8.7+PTX",
}


@pytest.mark.parametrize("job", sorted(AARCH64_CUDA))
def test_dry_run_of_an_aarch64_cuda_job_shows_3_14t_and_its_arch_list(job):
    if not (CI_SUPPORT / f"{job}.yaml").is_file():
        pytest.fail(f"{job} is missing from .ci_support (python -m feedstock rerender)")
    # the jobs build natively on aarch64; --emulate lets an x86_64 machine plan them
    proc = run("--dry-run", "--emulate", "--min-free-gb", "0", job)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3.14t" in proc.stdout.splitlines()[0]
    assert f"gpu archs:    {AARCH64_CUDA[job]}" in proc.stdout.splitlines()
    # an arch this CUDA cannot build (CUDA 13 dropped 5.0; 11.0 is CUDA 13's new name for
    # Thor, 12.9 calls it 10.1): one line, exit 2, nothing planned
    cuda, arch = ("13.0", "5.0") if "version13.0" in job else ("12.9", "11.0")
    bad = run("--dry-run", "--emulate", "--cuda-arch", arch, job)
    assert bad.returncode == 2 and bad.stdout == "", bad.stdout
    assert bad.stderr.count("\n") == 1
    assert f"CUDA {cuda} cannot build compute capability {arch}" in bad.stderr


X86_CUDA = {"12.9": "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_version12.9gpu_backendcudarocm_versionNone",
            "13.0": "linux_64_blas_implgenericc_stdlib_version2.28cuda_compiler_version13.0gpu_backendcudarocm_versionNone"}


@pytest.mark.parametrize("cuda", sorted(X86_CUDA))
def test_family_specific_cuda_archs_from_cuda_12_9(cuda):
    """--cuda-arch '10.0f;12.0f' (CUDA 12.9's family-specific targets) reaches the build on both
    CUDA versions; a capability without a family form is one line naming those that have one."""
    job = X86_CUDA[cuda]
    if not (CI_SUPPORT / f"{job}.yaml").is_file():
        pytest.fail(f"{job} is missing from .ci_support (python -m feedstock rerender)")
    proc = run("--dry-run", "--min-free-gb", "0", "--cuda-arch", "10.0f;12.0f", job)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu archs:    10.0f;12.0f" in proc.stdout.splitlines()
    assert "  FEEDSTOCK_CUDA_ARCH_LIST=10.0f;12.0f" in proc.stdout.splitlines()
    bad = run("--dry-run", "--cuda-arch", "9.0f;12.0f", job)
    assert bad.returncode == 2 and bad.stdout == "", bad.stdout
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("error: ")
    assert f"CUDA {cuda} cannot build compute capability 9.0f (" in bad.stderr
    family = "10.0f 10.1f 10.3f 12.0f 12.1f" if cuda == "12.9" else "10.0f 10.3f 11.0f 12.0f 12.1f"
    assert f"family-specific {family}" in bad.stderr
