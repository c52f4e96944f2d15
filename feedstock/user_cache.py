"""The folder the feedstock tools keep their caches in, outside the repository (the
after-build commands' sources, packages and compile cache; parity's renders)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """$PYTORCH_FEEDSTOCK_CACHE, else $XDG_CACHE_HOME/pytorch-feedstock, else
    ~/.cache/pytorch-feedstock (as the real-binary tests' caches)."""
    if os.environ.get("PYTORCH_FEEDSTOCK_CACHE"):
        return Path(os.environ["PYTORCH_FEEDSTOCK_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytorch-feedstock"
