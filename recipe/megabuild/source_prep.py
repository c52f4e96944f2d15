"""Source-tree preparation before the first configure: what the release tarball needs so that
`setup.py build` neither checks git submodules nor downloads anything.

- `.gitmodules`: with it, setup.py checks that every submodule is checked out; the release
  tarball carries the submodules' files but no git metadata, and the build does not use all
  of them. Without the file the check is skipped.
- `third_party/NNPACK/cmake/DownloadSix.cmake`: NNPACK's configure downloads the `six` module
  from the network; emptied, it downloads nothing (the build machine may be offline, and a
  download makes the build depend on a server).

Both are applied once per source tree; running again changes nothing. Each change is logged.
"""
from __future__ import annotations

from pathlib import Path

from . import log

SUBMODULE_LIST = Path(".gitmodules")
NETWORK_FETCHES = (Path("third_party") / "NNPACK" / "cmake" / "DownloadSix.cmake",)
EMPTIED = "# emptied by the feedstock driver: no downloads during the build\n"


def prepare_source(src_dir: Path) -> list[str]:
    """Apply the preparations to src_dir; returns what was changed (empty when nothing was)."""
    changed: list[str] = []
    submodules = src_dir / SUBMODULE_LIST
    if submodules.exists():
        submodules.unlink()
        changed.append(f"removed {SUBMODULE_LIST} (no submodule check in setup.py)")
    for relative in NETWORK_FETCHES:
        script = src_dir / relative
        if script.is_file() and script.read_text() != EMPTIED:
            script.write_text(EMPTIED)
            changed.append(f"emptied {relative} (no download during configure)")
    for line in changed:
        log.info(f"source: {line}")
    return changed
