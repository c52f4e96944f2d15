"""The real images the image tests share, built once for the package (tests/support/image_rig.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.support.image_rig import Rig, make_rig


@pytest.fixture(scope="package")
def rig(tmp_path_factory: pytest.TempPathFactory, wheelbuild: dict, realbuild_toolchain: dict,
        cpythons: dict[str, Path]) -> Iterator[Rig]:
    yield from make_rig(tmp_path_factory, wheelbuild, realbuild_toolchain, cpythons)
