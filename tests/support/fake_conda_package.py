"""A conda package that holds nothing but its metadata (info/index.json, info/paths.json): what a
channel needs to list a pytorch build, for the command-line checks that stop before installing
anything (no real pytorch is built for them)."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path


def write_metadata_package(channel: Path, name: str, version: str, build: str, subdir: str = "linux-64",
                           depends: tuple[str, ...] = ()) -> Path:
    """channel/subdir/name-version-build.tar.bz2 (and an empty noarch/), not indexed."""
    index = {"name": name, "version": version, "build": build, "build_number": 0, "subdir": subdir,
             "depends": list(depends), "license": "BSD-3-Clause", "timestamp": 0}
    if subdir != "noarch":
        index.update(platform=subdir.split("-")[0], arch="x86_64")
    target = channel / subdir / f"{name}-{version}-{build}.tar.bz2"
    target.parent.mkdir(parents=True, exist_ok=True)
    (channel / "noarch").mkdir(exist_ok=True)
    with tarfile.open(target, "w:bz2") as tar:
        for member, data in (("info/index.json", index), ("info/paths.json", {"paths": [], "paths_version": 1})):
            raw = json.dumps(data).encode()
            info = tarfile.TarInfo(member)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return target
