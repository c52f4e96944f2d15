"""The real images the image tests share, built once for the run (tests/support/image_rig.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.image_rig import Rig, make_rig
from tests.support.shared_fixture import build_once


@pytest.fixture(scope="package")
def rig(tmp_path_factory: pytest.TempPathFactory, wheelbuild: dict, realbuild_toolchain: dict,
        cpythons: dict[str, Path]) -> Rig:
    # two modules use it, and with two workers they may run side by side: one rig, one podman store
    return build_once(tmp_path_factory, "image-rig",
                      lambda work: make_rig(work, wheelbuild, realbuild_toolchain, cpythons))
