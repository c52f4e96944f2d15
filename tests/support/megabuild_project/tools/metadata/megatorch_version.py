"""The scikit-build-core form's version provider: as PyTorch's own, PYTORCH_BUILD_VERSION, plus
.post<N> for a PYTORCH_BUILD_NUMBER above 1 (which is why the driver always sets 0)."""
from __future__ import annotations

import os


def dynamic_metadata(settings: dict, project: object = None) -> dict[str, str]:
    """A [[tool.dynamic-metadata]] provider: the [project] fragment it fills in."""
    version = os.environ.get("PYTORCH_BUILD_VERSION", "0.1.0")
    number = int(os.environ.get("PYTORCH_BUILD_NUMBER", "0") or 0)
    return {"version": f"{version}.post{number}" if number > 1 else version}
