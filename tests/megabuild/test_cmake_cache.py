"""CMakeCache model and Python retargeting, on the real PyTorch caches in tests/fixtures (copied from the team's shared fixtures)."""
from __future__ import annotations

from pathlib import Path

import pytest

from megabuild.cmake_cache import CMakeCache
from megabuild.errors import MegabuildError
from megabuild.python_target import PythonTarget
from megabuild.retarget import RECORD_KEYS, python_entry_keys, retarget_cache

# What sysconfig reports for the interpreter of the py311 cache (values read off that cache).
PY311 = PythonTarget(
    executable="/opt/envs/py311/bin/python",
    version="3.11.7",
    soabi="cpython-311-x86_64-linux-gnu",
    ext_suffix=".cpython-311-x86_64-linux-gnu.so",
    include_dir="/opt/python/3.11.7/include/python3.11",
    stdlib="/opt/python/3.11.7/lib/python3.11",
    platstdlib="/opt/python/3.11.7/lib/python3.11",
    purelib="/opt/envs/py311/lib/python3.11/site-packages",
    platlib="/opt/envs/py311/lib/python3.11/site-packages",
    numpy_include="/opt/envs/py311/lib/python3.11/site-packages/numpy/_core/include",
)
# The Python entries the fixture README lists (the checksums are allowed to stay stale), less
# FindPython's record of the interpreter, which the retarget drops for FindPython to rewrite.
PYTHON_ENTRIES = {
    "CMAKE_PREFIX_PATH", "Python_EXECUTABLE", "_Python_INCLUDE_DIR",
    "_Python_NumPy_INCLUDE_DIR",
    "FIND_PACKAGE_MESSAGE_DETAILS_Python", "PYBIND11_PYTHON_EXECUTABLE_LAST",
    "PYTHON_MODULE_EXTENSION", "pybind11_INCLUDE_DIRS",
}
CHECKSUMS = {"_Python_DEVELOPMENT_MODULE_SIGNATURE", "_Python_NUMPY_SIGNATURE"}
UNRELATED = "//Oldest protobuf accepted\nProtobuf_MIN_VERSION:STRING=3.12.4\n\n"


def blind_substitution(text: str) -> str:
    """The usual shell approach: sed over the whole file."""
    return text.replace("3.12", "3.11").replace("3;12", "3;11").replace("cpython-312", "cpython-311")


def with_unrelated_entry(text: str) -> str:
    anchor = "//Do not build ATen test binaries\n"
    assert anchor in text
    return text.replace(anchor, UNRELATED + anchor, 1)


@pytest.fixture
def py312_bytes(pytorch_cmakecache_dir: Path) -> bytes:
    return (pytorch_cmakecache_dir / "CMakeCache.py312.txt").read_bytes()


@pytest.fixture
def py311_bytes(pytorch_cmakecache_dir: Path) -> bytes:
    return (pytorch_cmakecache_dir / "CMakeCache.py311.txt").read_bytes()


# -- the model --------------------------------------------------------------------------------
def test_round_trip_is_byte_for_byte(py312_bytes: bytes, py311_bytes: bytes) -> None:
    for data in (py312_bytes, py311_bytes):
        cache = CMakeCache.parse(data)
        assert cache.to_bytes() == data
        assert len(cache) > 400


def test_round_trip_keeps_crlf_and_quoted_keys() -> None:
    data = (b"# This is the CMakeCache file.\r\n//doc\r\n\"A:B\":STRING=x;y\r\n"
            b"PLAIN=untyped value\r\nX-ADVANCED:INTERNAL=1\r\n")
    cache = CMakeCache.parse(data)
    assert cache.to_bytes() == data
    assert cache.get("A:B") == "x;y" and cache.entry("A:B").type == "STRING"
    assert cache.entry("PLAIN").type is None and cache.get("X-ADVANCED") == "1"
    cache.set("A:B", "z")
    assert cache.to_bytes() == data.replace(b'"A:B":STRING=x;y', b'"A:B":STRING=z')


def test_entries_are_typed(py312_bytes: bytes) -> None:
    cache = CMakeCache.parse(py312_bytes)
    assert cache.entry("BUILD_PYTHON").type == "BOOL"
    assert cache.entry("Python_EXECUTABLE").type == "UNINITIALIZED"
    assert cache.entry("_Python_INCLUDE_DIR").type == "INTERNAL"
    assert any(e.key.endswith("-ADVANCED") for e in cache)


def test_set_changes_one_line_only(py312_bytes: bytes) -> None:
    cache = CMakeCache.parse(py312_bytes)
    assert cache.set("ATEN_NO_TEST", "ON") == "OFF"
    before, after = py312_bytes.splitlines(), cache.to_bytes().splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert changed == [(b"ATEN_NO_TEST:BOOL=OFF", b"ATEN_NO_TEST:BOOL=ON")]
    assert cache.set("NEW_ENTRY", "1", "BOOL") is None
    assert cache.to_bytes().endswith(b"NEW_ENTRY:BOOL=1\n")
    with pytest.raises(MegabuildError, match="without a type"):
        cache.set("OTHER_NEW", "1")


def test_write_is_atomic_and_exact(tmp_path: Path, py312_bytes: bytes) -> None:
    target = tmp_path / "build" / "CMakeCache.txt"
    CMakeCache.parse(py312_bytes).write(target)
    assert target.read_bytes() == py312_bytes
    assert sorted(p.name for p in target.parent.iterdir()) == ["CMakeCache.txt"]


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[: d.index(b"_Python_INCLUDE_DIR") + 12], "truncated"),
    (lambda d: d.replace(b"ATEN_NO_TEST:BOOL=OFF", b"ATEN_NO_TEST BOOL OFF"), "not a cache entry"),
    (lambda d: d[:5000] + b"\0\0\0" + d[5000:], "NUL"),
    (lambda d: b"garbage\n" + d, "not a CMakeCache.txt"),
    (lambda d: b"", "not a CMakeCache.txt"),
])
def test_damaged_cache_is_refused(tmp_path: Path, py312_bytes: bytes, damage, message) -> None:
    path = tmp_path / "CMakeCache.txt"
    path.write_bytes(damage(py312_bytes))
    with pytest.raises(MegabuildError, match=message) as info:
        CMakeCache.read(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_missing_key_is_named(py312_bytes: bytes) -> None:
    lines = [l for l in py312_bytes.splitlines(keepends=True)
             if not l.startswith(b"_Python_INTERPRETER_PROPERTIES:")]
    cache = CMakeCache.parse(b"".join(lines))
    with pytest.raises(MegabuildError, match="_Python_INTERPRETER_PROPERTIES"):
        retarget_cache(cache, PY311)


def test_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(MegabuildError, match="configure"):
        CMakeCache.read(tmp_path / "nope" / "CMakeCache.txt")


# -- reading the Python out of a cache ---------------------------------------------------------
def test_python_target_read_from_cache_matches_sysconfig_values(py311_bytes: bytes) -> None:
    assert PythonTarget.from_cmake_cache(CMakeCache.parse(py311_bytes)) == PY311


def test_an_empty_abiflags_reads_the_same_in_both_spellings(py311_bytes: bytes) -> None:
    """CMake 3.30 and later write an empty ABIFLAGS as `<none>`, older ones an empty field."""
    text = py311_bytes.decode()
    record = CMakeCache.parse(text).get("_Python_INTERPRETER_PROPERTIES")
    fields = record.split(";")
    assert fields[5] == ""
    fields[5] = "<none>"
    newer = CMakeCache.parse(text.replace(record, ";".join(fields)))
    assert PythonTarget.from_cmake_cache(newer) == PY311


# -- retargeting 3.12 -> 3.11 on the real caches ------------------------------------------------
def test_retarget_reproduces_py311_python_entries_and_nothing_else(
        py312_bytes: bytes, py311_bytes: bytes) -> None:
    cache = CMakeCache.parse(py312_bytes)
    changes = retarget_cache(cache, PY311)
    assert {c.key for c in changes} == PYTHON_ENTRIES | set(RECORD_KEYS)
    assert {c.key for c in changes if c.new is None} == set(RECORD_KEYS)
    out, ref, old = (CMakeCache.parse(data) for data in (cache.to_bytes(), py311_bytes, py312_bytes))
    assert {e.key for e in out} == {e.key for e in ref} - set(RECORD_KEYS)
    for entry in out:
        if entry.key in CHECKSUMS:
            assert entry.value == old.get(entry.key)  # stale checksums are fine, and untouched
        else:
            assert (entry.type, entry.value) == (ref.entry(entry.key).type, ref.get(entry.key)), entry.key
    # every line but the dropped ones stays where it was
    kept = [line for line in cache.to_bytes().splitlines() if line.split(b":", 1)[0].decode() not in RECORD_KEYS]
    assert len(kept) == len(py312_bytes.splitlines()) - len(RECORD_KEYS)


def test_cmakes_own_entries_stay_when_cmake_lives_in_site_packages(py312_bytes: bytes) -> None:
    """PyPI's cmake in the old interpreter's site-packages: CMAKE_COMMAND and CMAKE_ROOT are
    CMake's entries about itself, not Python entries, and keep the old path."""
    old = PythonTarget.from_cmake_cache(CMakeCache.parse(py312_bytes))
    data = f"{old.purelib}/cmake/data"
    own = {"CMAKE_COMMAND": f"{data}/bin/cmake", "CMAKE_CTEST_COMMAND": f"{data}/bin/ctest",
           "CMAKE_CPACK_COMMAND": f"{data}/bin/cpack", "CMAKE_ROOT": f"{data}/share/cmake-4.4"}
    cache = CMakeCache.parse(py312_bytes)
    for key, value in own.items():
        cache.set(key, value)
    changes = retarget_cache(cache, PY311)
    assert not {c.key for c in changes} & set(own)
    assert {key: cache.get(key) for key in own} == own


def test_another_interpreter_at_the_same_path_drops_the_record(py312_bytes: bytes) -> None:
    """conda-build gives every output the same $PREFIX: the path alone does not decide."""
    from dataclasses import replace
    cache = CMakeCache.parse(py312_bytes)
    old = PythonTarget.from_cmake_cache(cache)
    changes = retarget_cache(cache, replace(PY311, executable=old.executable))
    assert {c.key for c in changes if c.new is None} == set(RECORD_KEYS)
    assert not any(key in cache for key in RECORD_KEYS)


def test_retarget_keeps_an_unrelated_entry_with_3_12(py312_bytes: bytes) -> None:
    cache = CMakeCache.parse(with_unrelated_entry(py312_bytes.decode()))
    retarget_cache(cache, PY311)
    assert cache.get("Protobuf_MIN_VERSION") == "3.12.4"
    blind = CMakeCache.parse(blind_substitution(with_unrelated_entry(py312_bytes.decode())))
    assert blind.get("Protobuf_MIN_VERSION") == "3.11.4"  # what sed does to it


def test_blind_substitution_gets_python_entries_wrong(py312_bytes: bytes,
                                                      py311_bytes: bytes) -> None:
    blind = CMakeCache.parse(blind_substitution(py312_bytes.decode()))
    want = CMakeCache.parse(py311_bytes)
    wrong = {key for key in PYTHON_ENTRIES if blind.get(key) != want.get(key)}
    # the venv path carries no version, the base install the full one (3.12.1 -> 3.11.1)
    assert {"Python_EXECUTABLE", "_Python_INCLUDE_DIR", "CMAKE_PREFIX_PATH"} <= wrong
    assert blind.get("_Python_INCLUDE_DIR") == "/opt/python/3.11.1/include/python3.11"
    ours = CMakeCache.parse(py312_bytes)
    retarget_cache(ours, PY311)
    assert all(ours.get(key) == want.get(key) for key in PYTHON_ENTRIES)


def test_python_entries_are_found_by_key_and_by_value(py312_bytes: bytes) -> None:
    cache = CMakeCache.parse(py312_bytes)
    keys = set(python_entry_keys(cache, PythonTarget.from_cmake_cache(cache), PY311))
    assert PYTHON_ENTRIES | {"_Python_EXECUTABLE", "_Python_INTERPRETER_PROPERTIES"} <= keys  # CMAKE_PREFIX_PATH only by its value
    assert not keys & CHECKSUMS and "_Python_INTERPRETER_SIGNATURE" not in keys
    assert "CMAKE_INSTALL_PREFIX" not in keys


def test_left_over_trace_of_old_python_stops_with_entry_name(py312_bytes: bytes) -> None:
    extra = ("PYTHON_CONFIG_DIR:PATH=/opt/python/3.12.1/lib/python3.12/"
             "config-3.12-x86_64-linux-gnu\n")
    text = py312_bytes.decode() + extra
    cache = CMakeCache.parse(text)
    with pytest.raises(MegabuildError, match="PYTHON_CONFIG_DIR.*3.12") as info:
        retarget_cache(cache, PY311)
    assert "\n" not in str(info.value)
    assert cache.text() == text  # nothing applied


def test_target_without_numpy_is_refused_when_cache_needs_it(py312_bytes: bytes) -> None:
    from dataclasses import replace
    with pytest.raises(MegabuildError, match="numpy"):
        retarget_cache(CMakeCache.parse(py312_bytes), replace(PY311, numpy_include=None))


def test_retarget_to_same_python_changes_nothing(py312_bytes: bytes) -> None:
    cache = CMakeCache.parse(py312_bytes)
    assert retarget_cache(cache, PythonTarget.from_cmake_cache(cache)) == []
    assert cache.to_bytes() == py312_bytes  # FindPython's record stays too
