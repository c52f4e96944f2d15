"""Small source distributions written from text, for the image build-stage tests' extensions."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path


def write_sdist(path: Path, top: str, files: dict[str, str], name: str | None = None) -> Path:
    """path: a .tar.gz whose one folder `top` ("<name>-<version>") holds files and a PKG-INFO;
    name defaults to top's part before the version."""
    project, version = top.rsplit("-", 1)
    pkg_info = f"Metadata-Version: 2.1\nName: {name or project}\nVersion: {version}\n"
    with tarfile.open(path, "w:gz") as tar:
        for member, text in {"PKG-INFO": pkg_info, **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
