"""ccache for the compiles after the build: a dependent's sdist built by `downstream`, and the
build stage of `image`. The same sources against the same torch headers with the same compiler
then compile from the cache: the compiler still runs for every file (ccache is its launcher),
but a hit returns the object it made before.

What makes a hit survive the per-build paths (rattler-build's timestamped work folders, pip's
random build folders): `CCACHE_BASEDIR` makes every path below the build's folder relative,
`CCACHE_NOHASHDIR` leaves the working folder out, and `CCACHE_COMPILERCHECK=content` hashes the
compiler's bytes, not its mtime (a compiler package unpacked again has a new one). The recipe's
driver does the same for its CMake builds (recipe/megabuild/compile_cache.py: self-contained,
since conda-build copies only recipe/).

Each build appends to a stats log of its own (`CCACHE_STATSLOG`): one `# source` line per call,
then the counters it bumped; `count_compiles` reads it into one line for the user.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import FeedstockError
from ..user_cache import cache_root

HIT_COUNTERS = {"direct_cache_hit", "preprocessed_cache_hit"}
MISS_COUNTERS = {"cache_miss"}


def default_folder() -> Path:
    """ccache/ of the after-build cache root: one compile cache for the downstream builds and the
    image build stages."""
    return cache_root() / "ccache"


def ccache_on_path() -> str | None:
    return shutil.which("ccache")


def choose(asked: Path | None, off: bool, option: str = "--compile-cache", host_ccache: bool = True) -> Path | None:
    """The compile cache folder to use: the one asked for, none with --no-compile-cache, else the
    default one. With host_ccache (the compiles run here, not in a build stage that brings its
    own), ccache must be installed: exit 3 when one was asked for, no cache by default."""
    if off and asked is not None:
        raise FeedstockError(f"{option} {asked} and --no-{option[2:]} contradict each other; give one")
    if off:
        return None
    if asked is not None:
        if host_ccache and ccache_on_path() is None:
            raise FeedstockError(f"{option} {asked}: ccache is not installed (apt-get install ccache, or "
                                 "conda install ccache); drop the option to build without it", exit_code=3)
        if asked.exists() and not asked.is_dir():
            raise FeedstockError(f"{option} {asked}: not a folder; give a folder for ccache to keep its objects in")
        return asked.resolve()
    return default_folder() if ccache_on_path() or not host_ccache else None


def environment(folder: Path | str, stats_log: str, base_dir: str | None = None) -> dict[str, str]:
    """ccache's variables for one build whose own files are all below base_dir (without it, the
    caller sets CCACHE_BASEDIR where the build's folder is known)."""
    env = {"CCACHE_DIR": str(folder), "CCACHE_NOHASHDIR": "1", "CCACHE_COMPILERCHECK": "content",
           "CCACHE_STATSLOG": stats_log}
    return {**env, "CCACHE_BASEDIR": base_dir} if base_dir else env


@dataclass(frozen=True)
class Compiles:
    hits: int = 0
    misses: int = 0
    other: int = 0   # links, preprocessing-only and other calls ccache passes straight to the compiler

    @property
    def compiled(self) -> int:
        """The translation units compiled through ccache (served from the cache or not)."""
        return self.hits + self.misses

    def line(self) -> str:
        return f"{self.compiled} compiles, {self.hits} from the cache"


def count_compiles(stats_log: Path) -> Compiles:
    """Sum a ccache stats log; Compiles() when there is none (nothing went through ccache)."""
    try:
        text = stats_log.read_text(errors="replace")
    except FileNotFoundError:
        return Compiles()
    calls: list[set[str]] = []
    for line in text.splitlines():
        if line.startswith("# "):
            calls.append(set())
        elif line.strip() and calls:
            calls[-1].add(line.strip())
    hits = sum(1 for counters in calls if counters & HIT_COUNTERS)
    misses = sum(1 for counters in calls if not counters & HIT_COUNTERS and counters & MISS_COUNTERS)
    return Compiles(hits, misses, len(calls) - hits - misses)
