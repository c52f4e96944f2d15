"""rattler-build's renders for the parity check, kept between runs.

Parity renders recipe.yaml with rattler-build for every job and every variant of every platform
(about 190 renders, two thirds of a lint). A render's result depends only on what it is given:
the recipe's text, the job file's text (or the variant's values), the platform, rattler-build's
version and our code that turns a render into what is compared. This cache keeps each result
under a digest of exactly those, so a lint after an edit of meta.yaml, a patch or the pinning
renders recipe.yaml again only where its inputs changed. An edit of recipe.yaml, of a job file,
of py-rattler-build or of the feedstock's own code misses and renders again.

One JSON file per recipe text (`<cache root>/parity-renders/<digest>.json`), written whole and
atomically at the end of a run; the newest `KEEP` files are kept. `PYTORCH_FEEDSTOCK_NO_RENDER_CACHE=1`
turns it off (every render is done, nothing is read or written).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from common.atomic_files import write_atomically

from ...user_cache import cache_root

KEEP = 16
DISABLE = "PYTORCH_FEEDSTOCK_NO_RENDER_CACHE"
FORMAT = 1
_CODE = Path(__file__).resolve().parents[2]   # feedstock/: the code that shapes a cached result


def _code_digest() -> str:
    sha = hashlib.sha256()
    for path in sorted(_CODE.rglob("*.py")):
        sha.update(os.fsencode(path.relative_to(_CODE)) + b"\0" + path.read_bytes())
    return sha.hexdigest()


def _tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("py-rattler-build")
    except PackageNotFoundError:
        return "unknown"


class RenderCache:
    """Results of one recipe text's renders, by the digest of each render's other inputs."""

    def __init__(self, recipe_text: bytes, folder: Path | None = None) -> None:
        self.enabled = os.environ.get(DISABLE, "") not in ("1", "true", "yes")
        self.folder = folder or cache_root() / "parity-renders"
        self.entries: dict[str, Any] = {}
        if self.enabled:   # the code's digest reads every module: only for a cache in use
            seed = hashlib.sha256(b"%d\0" % FORMAT + recipe_text + b"\0" + _tool_version().encode()
                                  + b"\0" + _code_digest().encode())
            self.file = self.folder / f"{seed.hexdigest()[:32]}.json"
            self.entries = self._load()
        self.hits = self.misses = 0
        self._changed = False

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}   # none yet, or unreadable: rendered again and written anew
        return data if isinstance(data, dict) else {}

    def get(self, parts: list[str], render: Callable[[], Any], read: Callable[[Any], Any] = lambda v: v) -> Any:
        """read() of the cached result for these inputs, else of render() (kept for the next
        run); a cached value that read() cannot take (a hand-edited file) is rendered again."""
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()
        if self.enabled and key in self.entries:
            try:
                value = read(self.entries[key])
            except (TypeError, KeyError, ValueError, AttributeError):
                pass
            else:
                self.hits += 1
                return value
        self.misses += 1
        value = render()
        if self.enabled:
            self.entries[key] = value
            self._changed = True
        return read(value)

    def save(self) -> None:
        """Write the results (if any are new) and keep the newest KEEP files; a cache that
        cannot be written is no error (the next run renders again)."""
        if not (self.enabled and self._changed):
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomically(self.file, json.dumps(self.entries, sort_keys=True))
            files = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in files[KEEP:]:
                old.unlink(missing_ok=True)
        except OSError:
            pass
