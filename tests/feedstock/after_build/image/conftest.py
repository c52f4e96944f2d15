"""The real images the image tests share, built once for the run (tests/support/image_rig.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.image_rig import PYTHON, Rig, make_rig
from tests.support.shared_fixture import build_once


@pytest.fixture(scope="session")
def image_bases(tmp_path_factory: pytest.TempPathFactory, cpythons: dict[str, Path]) -> list[Path]:
    """The images' Debian bases (runtime and build stage), made before this worker waits on the
    toolchain channel (tests/support/ahead.py): a look at their cache on a warm machine."""
    from tests.support.ahead import image_bases as make

    def build(_: Path) -> list[Path]:
        try:
            return make(cpythons[PYTHON])
        except Exception as err:   # noqa: BLE001 - only a head start: the image command makes
            # the bases again and fails there with its own line, in the test that needs them
            print(f"image bases not made ahead: {type(err).__name__}: {err}")
            return []

    return build_once(tmp_path_factory, "image-bases", build)


@pytest.fixture(scope="package")
def rig(image_bases: list[Path], tmp_path_factory: pytest.TempPathFactory, wheelbuild: dict,
        realbuild_toolchain: dict, cpythons: dict[str, Path]) -> Rig:
    # two modules use it, and with two workers they may run side by side: one rig, one podman store
    return build_once(tmp_path_factory, "image-rig",
                      lambda work: make_rig(work, wheelbuild, realbuild_toolchain, cpythons))
