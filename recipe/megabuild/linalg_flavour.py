"""Which MAGMA flavour a staged libtorch_cuda_linalg is, recorded beside the stage.

The split stages the linalg library twice: as `nomagma` after its first build and as `magma`
after the USE_MAGMA flip. Each stage gets a record (`<stage>.json`: the flavour, the cache's
USE_MAGMA when it was staged, each file's sha256) only once the split knows the flavour is
right, and the record goes first whenever a stage is made again. The libtorch-cuda-linalg step
installs nothing without a record that names its flavour and matches the staged bytes, and
never a magma stage whose library is the nomagma one: a split that failed between staging and
checking (the flip changed nothing) leaves no installable magma stage behind.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .errors import MegabuildError
from .files import write_atomically
from .scikit_build import same_setting
from .staging import iter_files

FLAVOURS = {"magma": "ON", "nomagma": "OFF"}  # flavour -> USE_MAGMA it is built with


def record_path(stage: Path) -> Path:
    return stage.with_name(stage.name + ".json")


def flavour_of(stage: Path) -> str:
    return stage.name


def _digests(stage: Path) -> dict[str, str]:
    return {p.relative_to(stage).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in iter_files(stage) if p.is_file() and not p.is_symlink()}


def forget(stage: Path) -> None:
    """Drop the record before a stage is made again: until recorded, it installs nowhere."""
    record_path(stage).unlink(missing_ok=True)


def record(stage: Path, use_magma: str) -> None:
    """Record the stage as its folder's flavour; `use_magma`: the cache's value it was built with."""
    flavour = flavour_of(stage)
    if not same_setting(use_magma, FLAVOURS[flavour]):
        raise MegabuildError(f"{stage} would be recorded as {flavour}, but the cache it was "
                             f"built from says USE_MAGMA={use_magma}; run the libtorch-split "
                             "step again from a clean build folder")
    data = {"flavour": flavour, "USE_MAGMA": use_magma, "files": _digests(stage)}
    write_atomically(record_path(stage), (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())


def _read(stage: Path) -> dict | None:
    try:
        data = json.loads(record_path(stage).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def check(stage: Path) -> None:
    """Refuse a stage whose library is not its folder's flavour (see the module doc)."""
    flavour = flavour_of(stage)
    rerun = "run the libtorch-split step again; nothing was installed"
    data = _read(stage)
    if data is None:
        raise MegabuildError(f"{stage} has no record of its MAGMA flavour ({record_path(stage).name}): "
                             f"the split that staged it did not finish checking it; {rerun}")
    if data.get("flavour") != flavour or not same_setting(str(data.get("USE_MAGMA")), FLAVOURS[flavour]):
        raise MegabuildError(f"{record_path(stage)} does not record a {flavour} build "
                             f"(flavour {data.get('flavour')!r}, USE_MAGMA {data.get('USE_MAGMA')!r}); {rerun}")
    if data.get("files") != _digests(stage):
        raise MegabuildError(f"the files in {stage} are not the ones the split staged and "
                             f"recorded in {record_path(stage).name}; {rerun}")
    other = _read(stage.with_name("nomagma" if flavour == "magma" else "magma"))
    if other and other.get("files") == data["files"]:
        raise MegabuildError(f"{stage} holds the same library as the "
                             f"{other.get('flavour')} stage, so it is not a {flavour} build; {rerun}")
