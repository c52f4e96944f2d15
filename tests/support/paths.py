"""Where the repository and the real data the tests use live."""
from __future__ import annotations

import re
from pathlib import Path

# where heavy inputs are kept between runs, once per machine (the NVIDIA packages, the 3.13t
# interpreter, PyPI's build tools, the machine cache): the after-build tools' own cache root
from feedstock.user_cache import cache_root  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPE_DIR = REPO_ROOT / "recipe"
# real data the tests need, kept in the project so a fresh clone runs every test
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"
TORCH_WHEEL_VERSION = "2.13.0"
# the generic-BLAS cpu job of .ci_support, the one the real builds and the rocm check start from
CPU_GENERIC_JOB = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
# the release the recipe packages (what a build from the recipe itself is versioned as); the
# cached CPU wheel above is older: the real-package tests bump a copy back to it
RECIPE_VERSION = re.search(r'^{% set version = "([^"]+)" %}', (RECIPE_DIR / "meta.yaml").read_text(), re.M).group(1)
