"""A Ninja job pool of their own for PyTorch's heaviest compile targets.

Lowering `MAX_JOBS` for the whole build because a few targets need several GB per compile
slows every other compile down. Instead, the targets in `HEAVY_TARGETS` compile in the Ninja
pool `POOL_NAME`, sized from `MemAvailable` at `GIB_PER_HEAVY_JOB` per compile; everything
else keeps `MAX_JOBS`.

How it reaches CMake without patching PyTorch: setup.py passes every `CMAKE_*` environment
variable to the first configure as a `-D` definition, so `CMAKE_JOB_POOLS` defines the pool
and `CMAKE_PROJECT_INCLUDE` names `INCLUDE_FILE`, a CMake file the front end writes into the
source tree before it runs setup.py (`ensure_include`). CMake runs it right after the
top-level `project()`; it defers a call to the end of the top-level directory, when every
target exists, and sets `JOB_POOL_COMPILE` on the heavy targets this build has. A target
missing from a build (CPU-only: no `flash_attention`) is simply skipped; nothing upstream has
to match line for line, so no patch can go stale on a version bump.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from .files import write_atomically
from .errors import MegabuildError

POOL_NAME = "feedstock_heavy"
# relative to the source tree; written before each setup.py run, named in the cache from then on
INCLUDE_FILE = "megabuild-job-pools.cmake"
# Memory one heavy compile may need, in GiB. Evidence: a FlashAttention kernel took 5.3 GB
# with nvcc 12.3 (pytorch#130443); FBGEMM budgets 5 GB per multi-arch nvcc job (FBGEMM
# #5679). Our arch lists have 6-9 entries, more than either measured, so 8.
GIB_PER_HEAVY_JOB = 8
# CMake target -> why it is heavy (which upstream target, and the evidence). Data, not code:
# add a target here when a build log shows it being killed for memory.
HEAVY_TARGETS: dict[str, str] = {
    "flash_attention": (
        "aten/src/ATen/CMakeLists.txt, OBJECT library of the FlashAttention CUDA kernels "
        "(objects linked into torch_cuda): 5.3 GB per nvcc process (pytorch#130443), OOM on "
        "CI unless built with -j2 (pytorch#190663); upstream proposed its own pool "
        "(pytorch#162253, FA_MAX_JOBS)"),
    "fbgemm_genai": (
        "aten/src/ATen/CMakeLists.txt, FBGEMM's gen_ai CUTLASS kernels (USE_FBGEMM_GENAI, "
        "CUDA sm90/sm100): killed for memory when built wide (FBGEMM#5005, FBGEMM#5679); "
        "Anaconda's PyTorch build gives exactly these a Ninja pool of their own"),
}


def pool_size(max_jobs: int, mem_bytes: int | None, override: int | None = None) -> int:
    """Parallel heavy compiles: the override, else MemAvailable / GIB_PER_HEAVY_JOB (at least
    1), never more than MAX_JOBS (Ninja's -j caps the pool anyway)."""
    if override is not None:
        if override < 1:
            raise MegabuildError(f"FEEDSTOCK_HEAVY_JOBS={override}: the job pool {POOL_NAME} needs at "
                                 "least 1 job; set 1 or more, or unset it to size the pool from memory")
        return min(override, max_jobs)
    if mem_bytes is None:
        return max_jobs
    return max(1, min(max_jobs, mem_bytes // (GIB_PER_HEAVY_JOB * 1024 ** 3)))


def pool_environment(src_dir: Path, size: int) -> dict[str, str]:
    """The CMAKE_* variables setup.py hands to CMake for the pool."""
    return {"CMAKE_JOB_POOLS": f"{POOL_NAME}={size}",
            "CMAKE_PROJECT_INCLUDE": str(Path(src_dir) / INCLUDE_FILE)}


def include_text(targets: Mapping[str, str] = HEAVY_TARGETS) -> str:
    names = " ".join(targets)
    return f"""\
# Written by the feedstock's build driver (recipe/megabuild/job_pools.py); CMAKE_PROJECT_INCLUDE
# runs it after project(). The heavy targets compile in the Ninja pool {POOL_NAME}
# (CMAKE_JOB_POOLS); everything else keeps the build's -j.
include_guard(GLOBAL)
if(CMAKE_GENERATOR MATCHES "Ninja" AND CMAKE_JOB_POOLS MATCHES "(^|;){POOL_NAME}=")
  function(_feedstock_heavy_pool)
    foreach(target IN ITEMS {names})
      if(TARGET ${{target}})
        set_property(TARGET ${{target}} PROPERTY JOB_POOL_COMPILE {POOL_NAME})
        message(STATUS "feedstock: ${{target}} compiles in the Ninja pool {POOL_NAME} (${{CMAKE_JOB_POOLS}})")
      endif()
    endforeach()
  endfunction()
  cmake_language(DEFER DIRECTORY "${{CMAKE_SOURCE_DIR}}" CALL _feedstock_heavy_pool)
endif()
"""


def ensure_include(env: Mapping[str, str]) -> Path | None:
    """Write INCLUDE_FILE where `env`'s CMAKE_PROJECT_INCLUDE names it, before anything runs
    CMake (atomically; unchanged content is not rewritten, so CMake sees no reason to
    regenerate). None when the environment has no pool."""
    named = env.get("CMAKE_PROJECT_INCLUDE", "")
    if not named.endswith(INCLUDE_FILE):
        return None
    path = Path(named)
    text = include_text()
    if not (path.is_file() and path.read_text() == text):
        write_atomically(path, text.encode())
    return path
