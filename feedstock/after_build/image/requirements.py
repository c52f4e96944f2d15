"""The app's pip requirements, as a layer of their own on top of the conda environment.

torch is already installed by conda: a requirements file that names torch with a version the
environment does not have (or from a URL or a path) would replace it, so it is refused naming
the line. pip then runs inside the image (podman --rootfs on the unpacked image, so the scripts'
shebangs and the installed-package check are the image's own) with a constraint pinning torch,
and installs under --root /out: what lands there is exactly the new layer.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ...errors import FeedstockError
from ...text_input import read_text
from .environment import PREFIX

TORCH_NAMES = {"torch", "pytorch"}
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _accepts(specifier: str, version: str) -> bool:
    """Whether `torch<specifier>` holds for the installed version."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False


def check_requirements(path: Path, torch_version: str) -> list[str]:
    """The file's lines; refused when a line would install a torch other than the image's."""
    try:
        lines = read_text(path, f"--requirements {path}").splitlines()
    except OSError as err:
        raise FeedstockError(f"--requirements {path}: {err.strerror}") from None
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or line.startswith("-"):
            if re.match(r"^-(r|c|e)\b|^--(requirement|constraint|editable)\b", line):
                raise FeedstockError(f"{path}:{number}: {line!r}: nested or editable requirements "
                                     "cannot be checked for torch; list them in this file")
            continue
        match = NAME.match(line)
        if not match or _canonical(match.group(1)) not in TORCH_NAMES:
            continue
        specifier = match.group(3).split(";", 1)[0].strip()
        if specifier.startswith("@") or not _accepts(specifier, torch_version):
            raise FeedstockError(f"{path}:{number}: {line!r} would replace the image's torch "
                                 f"{torch_version}; drop the line or accept {torch_version}")
    return lines


def pip_layer(rootfs: Path, requirements: Path, torch_version: str, out: Path, engine: str,
              find_links: Path | None, env: dict[str, str] | None = None) -> None:
    """pip install -r REQUIREMENTS inside the unpacked image; the new files land in `out`."""
    work = out.parent / "pip-input"
    work.mkdir()
    shutil.copy2(requirements, work / "requirements.txt")
    (work / "constraints.txt").write_text(f"torch=={torch_version}\n")
    out.mkdir()
    mounts = ["-v", f"{work}:/pip-input:ro", "-v", f"{out}:/out:rw"]
    pip_args = ["--no-cache-dir", "--disable-pip-version-check", "--no-compile", "--no-warn-script-location",
                "--root", "/out", "-r", "/pip-input/requirements.txt", "-c", "/pip-input/constraints.txt"]
    if find_links is not None:
        mounts += ["-v", f"{find_links.resolve()}:/pip-links:ro"]
        pip_args += ["--no-index", "--find-links", "/pip-links"]
    network = "none" if find_links is not None else "host"
    command = [engine, "run", "--rm", f"--network={network}", *mounts,
               "-e", f"PATH={PREFIX}/bin:/usr/bin:/bin", "-e", "PYTHONDONTWRITEBYTECODE=1",
               "--rootfs", str(rootfs), f"{PREFIX}/bin/python", "-m", "pip", "install", *pip_args]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        tail = " ".join((proc.stderr.strip() or proc.stdout.strip()).split())[-500:]
        raise FeedstockError(f"pip install -r {requirements} in the image failed: {tail}", exit_code=1)
    replaced = sorted(p.name for p in out.rglob("torch-*.dist-info"))
    if replaced:
        raise FeedstockError(f"pip would install {replaced[0]} over the image's torch {torch_version} "
                             f"(a dependency of {requirements} asks for it)", exit_code=1)
