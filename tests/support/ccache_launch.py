"""A test's own CMake project compiled through the machine's ccache (the folder the compile-cache
feature uses, ~/.cache/pytorch-feedstock/ccache): every translation unit still goes through the
compiler's launcher and is counted from ccache's stats log, and a machine that compiled the same
sources against the same headers before serves the objects (seconds instead of half a minute
of torch/torch.h per file). Without ccache on PATH, nothing changes."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from feedstock.after_build import compile_cache as compiles


@dataclass(frozen=True)
class CmakeCcache:
    defines: list[str] = field(default_factory=list)   # for the configure step
    env: dict[str, str] = field(default_factory=dict)   # for configure and build
    stats: Path | None = None                            # None: no ccache here

    def compiled(self) -> int | None:
        """Translation units compiled through ccache (served or not); None without ccache."""
        return None if self.stats is None else compiles.count_compiles(self.stats).compiled


def cmake_ccache(build_dir: Path, *reads: Path, languages: tuple[str, ...] = ("CXX",)) -> CmakeCcache:
    """ccache as the compiler launcher of `languages` for the project built in build_dir,
    whose sources and headers lie in `reads`: the base folder is the common one, so a later
    run's other temporary folder hashes the same."""
    if shutil.which("ccache") is None:
        return CmakeCcache()
    stats = build_dir.with_name(build_dir.name + "-ccache-stats.log")
    base = os.path.commonpath([build_dir, *reads])
    return CmakeCcache([f"-DCMAKE_{language}_COMPILER_LAUNCHER=ccache" for language in languages],
                       compiles.environment(compiles.default_folder(), str(stats), base_dir=base), stats)
