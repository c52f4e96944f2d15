"""Retargeting between a GIL and a free-threaded build of one Python version, on the real
PyTorch cache of tests/fixtures (configured against CPython 3.12.1). The free-threaded target
is described the way sysconfig describes a `--disable-gil` build: ABI flag `t`, SOABI
`cpython-312t-...`, include and library folders `python3.12t`."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from megabuild.cmake_cache import CMakeCache
from megabuild.errors import MegabuildError
from megabuild.python_target import PythonTarget
from megabuild.retarget import RECORD_KEYS, retarget_cache

# how a --disable-gil build of the same install spells its folders and ABI
FREE_THREADED_SPELLINGS = (("/py312/", "/py312t/"), ("python3.12", "python3.12t"),
                           ("/3.12.1/", "/3.12.1t/"), ("cpython-312-", "cpython-312t-"))
PATH_FIELDS = ("executable", "soabi", "ext_suffix", "include_dir", "stdlib", "platstdlib",
               "purelib", "platlib", "numpy_include")


def as_free_threaded(gil: PythonTarget) -> PythonTarget:
    fields = {}
    for name in PATH_FIELDS:
        value = getattr(gil, name)
        for old, new in FREE_THREADED_SPELLINGS:
            value = value.replace(old, new)
        fields[name] = value
    return replace(gil, abiflags="t", **fields)


@pytest.fixture
def py312(pytorch_cmakecache_dir: Path) -> bytes:
    return (pytorch_cmakecache_dir / "CMakeCache.py312.txt").read_bytes()


def python_values(cache: CMakeCache, keys: set[str]) -> str:
    return "\n".join(cache.get(key) for key in sorted(keys))


def test_free_threaded_is_read_from_abiflags_or_soabi(py312: bytes) -> None:
    gil = PythonTarget.from_cmake_cache(CMakeCache.parse(py312))
    py312t = as_free_threaded(gil)
    assert py312t.include_dir == "/opt/python/3.12.1t/include/python3.12t"
    assert not gil.free_threaded and py312t.free_threaded
    assert replace(py312t, abiflags="").free_threaded  # the SOABI alone says so too


def test_gil_to_free_threaded_and_back_leaves_no_trace_either_way(py312: bytes) -> None:
    cache = CMakeCache.parse(py312)
    gil = PythonTarget.from_cmake_cache(cache)
    py312t = as_free_threaded(gil)
    changes = retarget_cache(cache, py312t)
    keys = {c.key for c in changes if c.new is not None}
    assert {"_Python_INCLUDE_DIR", "PYTHON_MODULE_EXTENSION"} <= keys
    # FindPython's record (ABIFLAGS `t` in CMake's own spelling) is left for FindPython to write
    assert {c.key for c in changes if c.new is None} == set(RECORD_KEYS)
    to_t = python_values(cache, keys)
    assert cache.get("PYTHON_MODULE_EXTENSION") == ".cpython-312t-x86_64-linux-gnu.so"
    assert "python3.12/" not in to_t and "cpython-312-" not in to_t  # no GIL entry kept
    # and back (from that cache, which now lacks the record: the old interpreter is named):
    # the GIL cache again, byte for byte but for the dropped record, with no `t` entry left
    retarget_cache(cache, gil, old=py312t)
    want = b"".join(line for line in py312.splitlines(keepends=True)
                    if line.split(b":", 1)[0].decode() not in RECORD_KEYS)
    assert cache.to_bytes() == want
    assert "312t" not in python_values(cache, keys) and "3.12t" not in python_values(cache, keys)


@pytest.mark.parametrize("direction", ["gil_to_t", "t_to_gil"])
def test_a_mixed_up_abi_left_behind_stops_the_driver(py312: bytes, direction: str) -> None:
    gil = PythonTarget.from_cmake_cache(CMakeCache.parse(py312))
    py312t = as_free_threaded(gil)
    if direction == "gil_to_t":
        # sysconfig's config dir of the GIL build, under a folder the retarget maps: the path
        # moves, its `config-3.12-` (the GIL ABI) would stay
        extra, start, target, trace = (
            "PYTHON_CONFIG_DIR:PATH=/opt/python/3.12.1/lib/python3.12/config-3.12-x86_64-linux-gnu\n",
            py312.decode(), py312t, "3.12")
    else:
        source = CMakeCache.parse(py312)
        retarget_cache(source, py312t)
        extra, start, target, trace = (
            # a free-threaded config dir outside the interpreter's folders: only its `3.12t`
            # says which ABI it belongs to
            "Python_CONFIG_HINT:STRING=/usr/lib/python3.12t/config-3.12t-x86_64-linux-gnu\n",
            source.text(), gil, "3.12t")
    cache = CMakeCache.parse(start + extra)
    before = cache.text()
    with pytest.raises(MegabuildError, match="entry PYTHON_CONFIG_DIR|entry Python_CONFIG_HINT") as info:
        retarget_cache(cache, target, old=gil if direction == "gil_to_t" else py312t)
    assert repr(trace) in str(info.value) and "\n" not in str(info.value)
    assert cache.text() == before  # nothing applied
