"""feedstock/after_build/compile_cache.py: the choice of the cache folder, the stats-log count, and
the downstream builds' ccache wrapper (conda_package.CCACHE_LINES) run in bash with the machine's
ccache and gcc: the same source in two build folders of different paths is one miss, then a hit."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from feedstock.after_build import compile_cache
from feedstock.after_build.downstream.conda_package import CCACHE_LINES
from feedstock.errors import FeedstockError

STATS = """\
# /build/src/csrc/scatter.cpp
direct_cache_miss
preprocessed_cache_miss
cache_miss
# /build/src/csrc/cpu/scatter_cpu.cpp
direct_cache_hit
# /build/src/build/lib/_scatter_cpu.so
called_for_link
"""


def test_the_stats_log_counts_compiles_hits_and_the_rest(tmp_path):
    log = tmp_path / "stats.log"
    log.write_text(STATS)
    counted = compile_cache.count_compiles(log)
    assert (counted.hits, counted.misses, counted.other, counted.compiled) == (1, 1, 1, 2)
    assert counted.line() == "2 compiles, 1 from the cache"
    assert compile_cache.count_compiles(tmp_path / "none.log").compiled == 0


def test_the_folder_asked_for_the_default_or_none(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTORCH_FEEDSTOCK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(compile_cache, "ccache_on_path", lambda: "/usr/bin/ccache")
    assert compile_cache.choose(None, False) == tmp_path / "cache" / "ccache"
    assert compile_cache.choose(tmp_path / "mine", False) == (tmp_path / "mine").resolve()
    assert compile_cache.choose(None, True) is None
    with pytest.raises(FeedstockError, match="contradict"):
        compile_cache.choose(tmp_path / "mine", True)
    (tmp_path / "file").write_text("")
    with pytest.raises(FeedstockError, match="not a folder") as err:
        compile_cache.choose(tmp_path / "file", False)
    assert err.value.exit_code == 2

    monkeypatch.setattr(compile_cache, "ccache_on_path", lambda: None)
    assert compile_cache.choose(None, False) is None          # no ccache here: built without
    with pytest.raises(FeedstockError, match="ccache is not installed") as err:
        compile_cache.choose(tmp_path / "mine", False)
    assert err.value.exit_code == 3
    # an image's build stage brings its own ccache: the default stands without one here
    assert compile_cache.choose(None, False, host_ccache=False) == tmp_path / "cache" / "ccache"


@pytest.mark.compile
def test_the_downstream_wrapper_makes_a_second_build_folder_a_hit(tmp_path):
    ccache, gcc = shutil.which("ccache"), shutil.which("gcc")
    if not ccache or not gcc:
        pytest.skip("needs ccache and gcc (apt-get install ccache gcc; .ci/run does)")
    cache = tmp_path / "cache"
    # rattler-build runs the script in SRC_DIR
    script = "\n".join(["set -eu", 'cd "$SRC_DIR"', *CCACHE_LINES, '"$CC" -c "$SRC_DIR/one.c" -o "$SRC_DIR/one.o"'])
    results = []
    for folder in ("bld/rattler-build_one_1700000001", "bld/rattler-build_one_1700000002/longer"):
        src = tmp_path / folder / "work"
        src.mkdir(parents=True)
        (src / "one.c").write_text('#include "one.h"\nint one(void) { return ONE; }\n')
        (src / "one.h").write_text("#define ONE 1\n")
        log = tmp_path / f"stats-{len(results)}.log"
        env = {**os.environ, **compile_cache.environment(cache, str(log)), "SRC_DIR": str(src), "CC": gcc,
               "FEEDSTOCK_CCACHE": ccache}
        proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert (src / "one.o").is_file()
        wrapper = src.parent / "ccache-bin" / "gcc"
        assert wrapper.is_file() and ccache in wrapper.read_text()
        results.append(compile_cache.count_compiles(log))
    assert [(r.compiled, r.hits) for r in results] == [(1, 0), (1, 1)], results
