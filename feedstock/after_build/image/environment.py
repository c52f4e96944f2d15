"""The conda environment of an image: solved from the channels with py-rattler, installed into a
staging folder while recording /opt/env as its prefix, then split into the torch layer and the
rest by what each package's conda-meta record says it installed."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

from ...errors import FeedstockError
from ...text_input import read_json
from .layers import tree_names

PREFIX = "/opt/env"
METAPACKAGES = {"cpu": "pytorch-cpu", "gpu": "pytorch-gpu", "rocm": "pytorch-rocm"}
# the torch layer: what every image of one build shares byte for byte
TORCH_PACKAGES = ("libtorch", "libtorch-cuda-linalg", "pytorch")
# host paths rattler records in conda-meta; blank, so that the digest does not depend on the
# machine's package cache
HOST_PATH_KEYS = ("extracted_package_dir", "package_tarball_full_path")


@dataclass
class Environment:
    staging: Path                      # the image's root: staging/opt/env is /opt/env
    torch_version: str
    python_version: str
    torch_names: list[str]             # paths relative to staging, for the torch layer
    rest_names: list[str]              # everything else under opt/env


def _await(value):
    return asyncio.run(value) if asyncio.iscoroutine(value) else value


def channel_source(channel: str) -> str:
    """A local folder as a file:// URL (it must be an indexed channel); a name or URL as given."""
    path = Path(channel).expanduser()
    if path.exists():
        if not (path / "linux-64" / "repodata.json").is_file() and not (path / "noarch" / "repodata.json").is_file():
            raise FeedstockError(f"--channel {channel}: no linux-64/repodata.json or noarch/repodata.json; "
                                 "index it first (rattler-build and build-locally do)")
        return path.resolve().as_uri()
    if "/" in channel and "://" not in channel:
        raise FeedstockError(f"--channel {channel}: no such folder")
    return channel


def check_flavour(channel: str, flavour: str) -> dict[str, set[str]]:
    """A local first channel must hold the flavour's metapackage and pytorch: say so before
    solving. Returns its package names and their versions (empty for a remote channel)."""
    path = Path(channel).expanduser()
    if not path.is_dir():
        return {}
    channel_source(channel)  # an indexed channel at all
    names: dict[str, set[str]] = {}
    for subdir in ("linux-64", "noarch"):
        repodata = path / subdir / "repodata.json"
        if repodata.is_file():
            try:
                data = read_json(repodata)
                for key in ("packages", "packages.conda"):
                    for record in data.get(key, {}).values():
                        names.setdefault(record["name"], set()).add(str(record["version"]))
            except (ValueError, AttributeError, KeyError, TypeError) as err:
                raise FeedstockError(f"{repodata} is not a channel index ({type(err).__name__}: "
                                     f"{err}); index the channel again (python build-locally.py "
                                     "does, or rattler's index)") from None
    wanted = [METAPACKAGES[flavour], "pytorch", "libtorch"]
    missing = [name for name in wanted if name not in names]
    if missing:
        raise FeedstockError(f"channel {channel} has no {', '.join(missing)} (the {flavour} flavour's "
                             f"packages); build that flavour into it first")
    return names


def solve(channels: list[str], flavour: str, python: str | None, cuda: str | None,
          extra: list[str] | None = None):
    """The records of the flavour's metapackage, python (X.Y, or as `extra` pins it), pip and
    `extra` (an environment file's other dependencies)."""
    specs = [METAPACKAGES[flavour], *([f"python {python}.*"] if python else []), "pip", *(extra or [])]
    return solve_specs(channels, specs, cuda)


def solve_specs(channels: list[str], specs: list[str], cuda: str | None):
    """rattler's solve of `specs` for linux-64 with __cuda as given; a failure is one line."""
    import rattler

    overrides = rattler.VirtualPackageOverrides()
    overrides.cuda = rattler.Override.string(cuda or "")
    try:
        return _await(rattler.solve(sources=[rattler.Channel(channel_source(c)) for c in channels],
                                    specs=specs, platforms=["linux-64", "noarch"],
                                    virtual_packages=rattler.VirtualPackage.detect(overrides)))
    except FeedstockError:
        raise
    except Exception as err:  # rattler's SolverError spans lines
        raise FeedstockError(f"cannot solve {' '.join(specs)} from {', '.join(channels)}: "
                             f"{' '.join(str(err).split())[:300]}") from None


def check_torch_channel(records: list, channel: str) -> None:
    """Our torch must come from our (first) channel, not from one listed after it."""
    import rattler

    ours = rattler.Channel(channel_source(channel)).base_url.rstrip("/")
    for record in records:
        if record.name.normalized in TORCH_PACKAGES and str(record.channel).rstrip("/") != ours:
            raise FeedstockError(f"the solve took {record.name.normalized} {record.version} from "
                                 f"{record.channel}, not from our channel {channel}: a dependency asks "
                                 "for a torch our channel does not have; drop or loosen it")


def scrub(prefix: Path) -> None:
    """Remove what ties the installed tree to this machine (see HOST_PATH_KEYS)."""
    (prefix / "CACHEDIR.TAG").unlink(missing_ok=True)
    for record in sorted((prefix / "conda-meta").glob("*.json")):
        data = json.loads(record.read_text())
        for key in HOST_PATH_KEYS:
            if key in data:
                data[key] = ""
        if isinstance(data.get("link"), dict) and "source" in data["link"]:
            data["link"]["source"] = ""
        record.unlink()  # may be a hard link into the package cache: write a new file
        record.write_text(json.dumps(data, indent=2) + "\n")


def install_prefix(records: list, target: Path, prefix: str, cache: Path) -> None:
    """rattler's install of `records` into `target`, written as if at `prefix`."""
    import rattler

    try:
        _await(rattler.install(records, target_prefix=target, alternative_target_prefix=prefix,
                               cache_dir=cache, show_progress=False))
    except Exception as err:  # rattler's InstallerError spans lines
        raise FeedstockError(f"installing into {prefix} failed: {' '.join(str(err).split())[:400]}",
                             exit_code=1) from None


def install(records: list, staging: Path, cache: Path) -> Environment:
    """Install the solved records into staging/opt/env as if at /opt/env; scrub; split.

    `cache` is the package cache: a private one by default (build.py), because local channels
    (the test channels, two builds of one recipe) reuse name-version-build for other bytes, and
    a cache shared with other runs then hands out another package's files."""
    prefix = staging / PREFIX.lstrip("/")
    install_prefix(records, prefix, PREFIX, cache)
    scrub(prefix)
    torch_names: set[str] = set()
    for record_file in (prefix / "conda-meta").glob("*.json"):
        data = json.loads(record_file.read_text())
        if data.get("name") in TORCH_PACKAGES:
            torch_names.add(f"conda-meta/{record_file.name}")
            torch_names.update(data.get("files", []))
    rel = PREFIX.lstrip("/")
    rest = [name for name in tree_names(prefix) if name not in torch_names and _leaf(prefix / name)]
    return Environment(
        staging=staging, torch_version=version_of(records, "pytorch"),
        python_version=version_of(records, "python"),
        torch_names=sorted(f"{rel}/{name}" for name in torch_names),
        rest_names=sorted(f"{rel}/{name}" for name in rest))


def version_of(records: list, name: str) -> str:
    found = [str(record.version) for record in records if record.name.normalized == name]
    if not found:
        raise FeedstockError(f"the solve has no {name} package")
    return found[0]


def _leaf(path: Path) -> bool:
    """A file, a symlink or an empty folder: what a layer must list itself (write_layer adds
    the folders above)."""
    return path.is_symlink() or not path.is_dir() or not any(path.iterdir())
