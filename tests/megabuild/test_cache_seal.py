"""The pristine cache's seal (megabuild/cache_seal.py): a copy cut anywhere, at a line's end or
in its middle, is named truncated; one changed anywhere is named damaged; before any entry is
read, so the message never depends on which entries the cut happened to keep."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import FIXTURES_DIR

from megabuild.cache_seal import check_seal, read_sealed, seal
from megabuild.errors import MegabuildError

REAL_CACHE = FIXTURES_DIR / "pytorch-cmakecache" / "CMakeCache.py312.txt"
AGAIN = "run the libtorch-split step again"


@pytest.fixture(scope="module")
def sealed() -> bytes:
    return seal(REAL_CACHE.read_bytes())


def _message(data: bytes) -> str:
    with pytest.raises(MegabuildError) as info:
        check_seal(data, "stage/CMakeCache.pristine.txt", AGAIN)
    return str(info.value)


def test_a_whole_sealed_cache_reads_as_the_cache(sealed, tmp_path):
    path = tmp_path / "CMakeCache.pristine.txt"
    path.write_bytes(sealed)
    cache = read_sealed(path, AGAIN)
    assert cache.get("CMAKE_HOME_DIRECTORY") and len(cache) > 400
    assert cache.to_bytes() == sealed   # the seal is a comment line of the file


def test_a_cut_at_every_line_end_and_in_every_line_is_truncated(sealed):
    lines = sealed.splitlines(keepends=True)
    offsets, position = [], 0
    for line in lines:
        offsets += [position + len(line) // 2, position + len(line)] if len(line) > 1 else [position + 1]
        position += len(line)
    cuts = sorted({0, *offsets} - {len(sealed)})
    assert len(cuts) > 2 * 1000   # a real cache: over a thousand lines
    messages = {_message(sealed[:cut]).split(" (", 1)[0] for cut in cuts}
    assert messages == {"stage/CMakeCache.pristine.txt is truncated"}, messages


def test_a_change_anywhere_is_damaged(sealed):
    body_end = sealed.rindex(b"# megabuild seal: ")
    for position in range(0, body_end, max(1, body_end // 300)):
        changed = sealed[:position] + bytes([sealed[position] ^ 0x20]) + sealed[position + 1:]
        assert "pristine.txt is damaged" in _message(changed), position
    without_a_line = sealed.replace(b"CMAKE_HOME_DIRECTORY", b"", 1)
    message = _message(without_a_line)
    assert "is damaged" in message and message.endswith(AGAIN) and "\n" not in message


def test_an_unsealed_cache_from_an_older_split_is_truncated_with_what_to_do(tmp_path):
    path = tmp_path / "CMakeCache.pristine.txt"
    path.write_bytes(REAL_CACHE.read_bytes())
    with pytest.raises(MegabuildError, match=r"CMakeCache.pristine.txt is truncated .*run the libtorch-split"):
        read_sealed(path, AGAIN)
    with pytest.raises(MegabuildError, match="no such CMake cache"):
        read_sealed(tmp_path / "missing.txt", AGAIN)


def test_a_cache_without_its_last_newline_is_not_sealed():
    with pytest.raises(MegabuildError, match="truncated"):
        seal(REAL_CACHE.read_bytes().rstrip(b"\n"))
