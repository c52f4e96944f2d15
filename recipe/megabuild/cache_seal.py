"""The pristine cache's seal: the split step's copy of CMakeCache.txt ends with one comment line
that records its size and digest, so a copy that was cut short or changed is named as such
before anything reads its entries.

Without it, a truncated copy was judged by whichever entry happened to be missing: cut in the
right place it lost FindPython's records, and the driver blamed the project's CMakeLists.txt.
Where the cut falls depends on how long the paths in the cache are, so that depended on the
machine. The seal line is a comment, so the sealed file is still a cache CMake and
`CMakeCache` read as before.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from .cmake_cache import CMakeCache
from .errors import MegabuildError

SEAL_PREFIX = b"# megabuild seal: "
_SEAL = re.compile(rb"# megabuild seal: (?P<size>\d+) bytes, sha256 (?P<digest>[0-9a-f]{64})\n\Z")


def seal(data: bytes) -> bytes:
    """`data` (a whole cache, ending in a newline) with its seal line appended."""
    if not data.endswith(b"\n"):
        raise MegabuildError("a cache without its last newline cannot be sealed: it is truncated; "
                             "re-run the configure step that wrote it")
    return data + SEAL_PREFIX + f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}\n".encode()


def check_seal(data: bytes, source: str, again: str) -> None:
    """One line naming `source` as truncated or damaged unless its seal is whole and matches."""
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    found = _SEAL.match(data, start)
    if found is None:
        where = f"cut at byte {len(data)}" if data else "empty"
        raise MegabuildError(f"{source} is truncated ({where}: it does not end with the seal line "
                             f"the split step writes); {again}")
    body = data[:start]
    size, digest = int(found["size"]), found["digest"].decode()
    if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
        raise MegabuildError(f"{source} is damaged (its {len(body)} bytes no longer match the seal "
                             f"the split step wrote: {size} bytes, sha256 {digest[:12]}…); {again}")


def read_sealed(path: Path, again: str) -> CMakeCache:
    """The cache at `path`, its seal checked before any entry is read; `again`: what to do."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise MegabuildError(f"{path}: no such CMake cache; {again}") from None
    check_seal(data, str(path), again)
    return CMakeCache.parse(data, str(path))
