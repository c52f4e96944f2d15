"""Which pytorch builds a channel holds: version, flavour (cpu/gpu/rocm) and Python, from its
repodata.json (indexed first with rattler, in a child process: py-rattler can crash the
interpreter that indexed when it exits, see localbuild/in_container/rattler_build_py.py)."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from common.atomic_files import atomic_folder
from common.links import link_or_copy

from ...errors import FeedstockError
from ...text_input import read_json

INDEXER = Path(__file__).resolve().parents[3] / "localbuild" / "in_container" / "rattler_build_py.py"
# the build string starts with the variant tag (recipe.yaml: variant_tag), e.g. cuda130_generic_py311_h..._200
_FLAVOUR = (("cpu", "cpu"), ("cuda", "gpu"), ("rocm", "rocm"))


@dataclass(frozen=True)
class TorchBuild:
    version: str
    build: str
    flavour: str   # cpu, gpu or rocm
    python: str    # "3.11"
    sha256: str = field(default="", compare=False)  # of the package file: keys the built-package cache
    channel: Path | None = field(default=None, compare=False)  # the (indexed) channel that holds it

    def describe(self) -> str:
        return f"pytorch {self.version} {self.build}"


def index(channel: Path, shown_as: Path | None = None) -> None:
    """Index `channel` in place; errors name `shown_as` (the folder the user gave)."""
    proc = subprocess.run([sys.executable, str(INDEXER), "index", str(channel)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise FeedstockError(f"cannot index the channel {shown_as or channel}: {last}", exit_code=3)


def flavour_of(build: str) -> str:
    tag = re.sub(r"^dev[^_]*_", "", build)  # dev builds (build-locally --python ...) carry dev<tag>_
    return next((flavour for prefix, flavour in _FLAVOUR if tag.startswith(prefix)), "cpu")


PACKAGE_SUFFIXES = (".conda", ".tar.bz2")


def indexed_view(channel: Path, views: Path) -> Path:
    """A folder of our own under `views` that hard-links every package of `channel`, indexed: the
    channel the user passed is only read (its repodata, hand-made or broken, stays as it is)."""
    if not channel.is_dir():
        raise FeedstockError(f"channel {channel} is not a folder; build packages into it first "
                             "(python build-locally.py) or pass --channel", exit_code=3)
    source = channel.resolve()
    view = views / f"{source.name}-{hashlib.sha256(os.fsencode(source)).hexdigest()[:12]}"
    # made beside it and renamed when indexed: a run stopped halfway leaves no half a channel
    with atomic_folder(view) as building:
        (building / "noarch").mkdir(parents=True)
        for package in sorted(p for p in source.glob("*/*") if p.name.endswith(PACKAGE_SUFFIXES)):
            (building / package.parent.name).mkdir(exist_ok=True)
            # a hard link (or a copy): rattler's indexer passes symbolic links over
            link_or_copy(package, building / package.parent.name / package.name)
        index(building, shown_as=channel)
    return view


def torch_builds(channel: Path) -> list[TorchBuild]:
    """Every `pytorch` package of an indexed channel (an `indexed_view`)."""
    found = []
    for repodata in sorted(channel.glob("*/repodata.json")):
        data = read_json(repodata)
        for key in ("packages", "packages.conda"):
            for record in (data.get(key) or {}).values():
                if record.get("name") != "pytorch":
                    continue
                match = re.search(r"_py(\d)(\d+)t?_", record["build"])
                python = f"{match.group(1)}.{match.group(2)}" if match else ""
                found.append(TorchBuild(record["version"], record["build"], flavour_of(record["build"]), python,
                                        record.get("sha256") or "", channel))
    return sorted(set(found), key=lambda b: (b.flavour, b.version, b.build))


def first_for(build: TorchBuild, channels: list[Path]) -> list[Path]:
    """The channels with the one that holds `build` first: solvers give the first channel that
    has a package name all of that name (strict priority), so a CPU build's channel ahead of a
    GPU build's would hide the GPU build's libtorch."""
    return sorted(channels, key=lambda c: c != build.channel)


def matching(builds: list[TorchBuild], flavour: str, torch_spec: str) -> list[TorchBuild]:
    """The builds of this flavour ("any": every one, CPU first) whose version fits the spec, the
    newest first (compared as versions: as text, 2.9.0 would come after 2.13.0)."""
    from rattler import Version, VersionSpec

    spec = VersionSpec(torch_spec)
    fits = [b for b in builds if spec.matches(Version(b.version)) and flavour in ("any", b.flavour)]
    fits.sort(key=lambda b: Version(b.version), reverse=True)
    return sorted(fits, key=lambda b: b.flavour != "cpu")   # stable: newest first within each group
