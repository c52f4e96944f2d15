"""The bottom of an image: a Debian rootfs from mmdebstrap (cached), a rootfs tar given with
--base, or an OCI layout given with --base DIR[:REF]."""
from __future__ import annotations

import json
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from feedstock.after_build.image.rootfs import RootfsError, cache_dir, cache_key, copy_home_hook, debian_rootfs, SUITE
from ...errors import FeedstockError

# enough for pip and for Python's ssl: the conda environment brings everything else
PACKAGES = ("ca-certificates",)
# what a flavour's packages take from the system rather than the environment: the ROCm packages
# use the system ROCm (the build image's /opt/rocm); Debian's HIP runtime stands in for it
# unless --base brings a site's ROCm
FLAVOUR_PACKAGES = {"rocm": ("libamdhip64-5",)}


def runtime_packages(flavour: str) -> tuple[str, ...]:
    return (*PACKAGES, *FLAVOUR_PACKAGES.get(flavour, ()))
# a rootfs has these at its top (merged-usr or not)
ROOTFS_MARKERS = ("etc", "usr")


@dataclass(frozen=True)
class Base:
    kind: str          # "rootfs" (a tar, one layer) or "oci" (a layout and a ref in it)
    path: Path
    ref: str = ""


def _python_home(interpreter: Path) -> Path:
    out = subprocess.run([str(interpreter), "-c", "import sys; print(sys.base_prefix)"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise FeedstockError(f"--host-python {interpreter}: cannot run it")
    return Path(out.stdout.strip())


def debian_base(host_pythons: list[Path], packages: tuple[str, ...] = PACKAGES, use: str = "runtime") -> Base:
    """mmdebstrap's minbase with `packages` (plus each host CPython's install at its own path),
    cached by inputs; `use` names the cached tar (runtime, build)."""
    homes = sorted(str(_python_home(exe)) for exe in host_pythons)
    key = cache_key({"suite": SUITE, "packages": packages, "homes": homes, "use": use})
    target = cache_dir() / f"{use}-rootfs-{key}.tar"
    if not target.is_file():
        try:
            debian_rootfs(target, packages, [copy_home_hook(Path(home)) for home in homes])
        except RootfsError as err:
            raise FeedstockError(str(err), exit_code=3) from None
    return Base("rootfs", target)


def _oci_ref(layout: Path, ref: str) -> str:
    index = json.loads((layout / "index.json").read_text())
    refs = [m.get("annotations", {}).get("org.opencontainers.image.ref.name", "")
            for m in index.get("manifests", [])]
    if ref:
        if ref not in refs:
            raise FeedstockError(f"--base {layout}: no image {ref!r} in it (it has {', '.join(refs) or 'none'})")
        return ref
    if len(refs) != 1 or not refs[0]:
        raise FeedstockError(f"--base {layout}: holds {len(refs)} images; name one as {layout}:REF")
    return refs[0]


def given_base(spec: str) -> Base:
    """--base TAR (a rootfs) or DIR[:REF] (an OCI layout); anything else is one line."""
    path, ref = Path(spec), ""
    if not path.exists() and ":" in spec:
        head, ref = spec.rsplit(":", 1)
        path = Path(head)
    if path.is_dir():
        if not (path / "oci-layout").is_file() or not (path / "index.json").is_file():
            raise FeedstockError(f"--base {spec}: a folder but not an OCI layout (no oci-layout and index.json)")
        return Base("oci", path.resolve(), _oci_ref(path, ref))
    if not path.is_file():
        raise FeedstockError(f"--base {spec}: no such file or folder")
    if not tarfile.is_tarfile(path):
        raise FeedstockError(f"--base {spec}: not a tar (a rootfs tar or an OCI layout folder is expected)")
    tops: set[str] = set()
    with tarfile.open(path) as tar:
        for member in tar:
            parts = [part for part in member.name.split("/") if part not in ("", ".")]
            if parts:
                tops.add(parts[0])
            if tops.issuperset(ROOTFS_MARKERS):
                return Base("rootfs", path.resolve())
    raise FeedstockError(f"--base {spec}: a tar without {' and '.join(f'{m}/' for m in ROOTFS_MARKERS)} "
                         "at its top, not a root filesystem")
