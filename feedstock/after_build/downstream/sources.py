"""The dependents' PyPI files, downloaded once into a cache folder outside the repository and
checked against the catalog's sha256 (a partial download never takes the final name)."""
from __future__ import annotations

import os
import tempfile
import urllib.request
from pathlib import Path

from common.hashing import sha256_of
from common.input_files import open_regular
from common.path_kinds import file_url_path

from ...errors import FeedstockError
from ...user_cache import cache_root
from ...dependents_catalog import CATALOG, Source


def default_cache() -> Path:
    """downstream/ of the after-build cache root (user_cache.py)."""
    return cache_root() / "downstream"


def fetch(source: Source, cache: Path, catalog: Path = CATALOG) -> Path:
    """The file in the cache, downloaded first if it is not there; a sha256 that is not the one of
    `catalog` (the dependents file the source came from) is bad input naming that file."""
    target = cache / "sources" / source.sha256[:16] / source.file_name
    if target.is_file() and sha256_of(target) == source.sha256:
        return target
    made = [folder for folder in (target.parent, *target.parent.parents) if not folder.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=".partial-")
    try:
        local = source.url.startswith("file://")   # bytes-safe in any locale, and only a file that ends
        with os.fdopen(fd, "wb") as out, (open_regular(file_url_path(source.url)) if local
                                          else urllib.request.urlopen(source.url, timeout=120)) as response:
            while block := response.read(1 << 20):
                out.write(block)
        got = sha256_of(Path(partial))
        if got != source.sha256:
            raise FeedstockError(f"{source.file_name}: sha256 {got[:12]}... is not the catalog's "
                                 f"{source.sha256[:12]}...; fix {catalog}")
        os.replace(partial, target)
    except OSError as err:
        raise FeedstockError(f"cannot download {source.url}: {err}", exit_code=3) from None
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
        if not target.is_file():  # nothing of a failed download stays, not even its folders
            for folder in made:  # innermost first
                folder.rmdir()
    return target
