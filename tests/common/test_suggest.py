"""common/suggest.py: the one 'did you mean', for build-locally.py and the feedstock tools."""
from __future__ import annotations

from common.suggest import close_names

JOBS = ["linux_64_blas_implgenericcuda_compiler_version12.9", "linux_64_blas_implmklcuda_compiler_versionNone",
        "linux_aarch64_blas_implgenericcuda_compiler_version12.9", "osx_arm64_"]


def test_a_truncated_name_suggests_its_own_platform_first():
    assert close_names("linux_64_blas_impl", JOBS)[:2] == JOBS[:2]


def test_a_typo_is_found_by_similarity():
    assert close_names("osx_arm46_", JOBS) == ["osx_arm64_"]
    assert close_names("einop", ["torchvision", "torch-scatter", "einops"]) == ["einops"]


def test_case_only_differences_are_found_last_and_nothing_for_nonsense():
    assert close_names("OSX", JOBS) == ["osx_arm64_"]
    assert close_names("zzzz", JOBS) == [] and close_names("", JOBS) == []


def test_the_one_phrase():
    from common.suggest import did_you_mean

    assert did_you_mean("einop", ["einops", "torchvision"]) == "did you mean einops?"
    assert did_you_mean("Cuda", ["cuda", "rocm"]) == "did you mean cuda?"
    assert did_you_mean("linux_6", ["linux_64_a", "linux_64_b", "osx_64"], limit=3) == "did you mean linux_64_a, linux_64_b?"
    assert did_you_mean("zzz", ["einops"]) is None
