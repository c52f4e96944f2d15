"""The runtime pip step: the app's requirements as a layer of their own.

pip runs inside the image (podman --rootfs on the unpacked image, so the scripts' shebangs and
the installed-package check are the image's own) with a constraint pinning torch, and installs
under --root /out: what lands there is exactly the new layer. The wheels the build stage made
are installed from a read-only mount; nothing is compiled here (the image has no compiler).
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from ...errors import FeedstockError
from .container import run_in
from .environment import PREFIX
from .envfile import Line
from .pip_access import PipAccess
from .requirements import MARK

WHEELS_MOUNT = "/pip-wheels"


def pip_layer(rootfs: Path, options: list[str], runtime: list[Line], label: str, torch_version: str, out: Path,
              engine: str, find_links: Path | None, access: PipAccess, wheels: list[Path] = ()) -> None:
    """pip install the option lines and the runtime lines (plus the build stage's wheels) inside
    the unpacked image; the new files land in `out`."""
    work = out.parent / "pip-input"
    work.mkdir()
    lines = [*options, *(line.text for line in runtime), *(f"{WHEELS_MOUNT}/{wheel.name}" for wheel in wheels)]
    (work / "requirements.txt").write_text("".join(f"{line}\n" for line in lines))
    (work / "constraints.txt").write_text(f"torch=={torch_version}\n")
    out.mkdir()
    mounts = ["-v", f"{work}:/pip-input:ro", "-v", f"{out}:/out:rw"]
    pip_args = ["--no-cache-dir", "--disable-pip-version-check", "--no-compile", "--no-warn-script-location",
                "--root", "/out", "-r", "/pip-input/requirements.txt", "-c", "/pip-input/constraints.txt"]
    if wheels:
        mounts += ["-v", f"{wheels[0].parent}:{WHEELS_MOUNT}:ro"]
    if find_links is not None:
        mounts += ["-v", f"{find_links.resolve()}:/pip-links:ro"]
        pip_args += ["--no-index", "--find-links", "/pip-links"]
    network = "none" if find_links is not None else "host"
    proc = run_in(engine, rootfs, [f"{PREFIX}/bin/python", "-m", "pip", "install", *pip_args],
                  mounts=mounts, network=network, extra=access.podman_args())
    if proc.returncode != 0:
        isolated = isolated_build_failure(proc.stdout + proc.stderr, options, runtime)
        if isolated:
            raise FeedstockError(isolated, exit_code=1)
        tail = " ".join((proc.stderr.strip() or proc.stdout.strip()).split())[-500:]
        hint = ""
        if "No module named 'torch'" in proc.stderr + proc.stdout:
            hint = (" (a package that needs torch to build: mark its line --no-build-isolation, and the "
                    "build stage builds it against the image's torch)")
        raise FeedstockError(f"pip install -r {label} in the image failed: {tail}{hint}", exit_code=1)
    replaced = sorted(p.name for p in out.rglob("torch-*.dist-info"))
    if replaced:
        raise FeedstockError(f"pip would install {replaced[0]} over the image's torch {torch_version} "
                             f"(a dependency of {label} asks for it)", exit_code=1)
    forget_build_stage_urls(out)


def isolated_build_failure(output: str, options: list[str], runtime: list[Line]) -> str | None:
    """One line for pip's failure to set up a package's isolated build (its build requirements,
    setuptools and friends, are not in --find-links or the index): the line of the user's file,
    what pip could not get, and the mark that builds it in the build stage instead. None for
    any other failure."""
    if "to install build dependencies did not run successfully" not in output:
        return None
    processing = re.findall(r"^(?:Processing|Collecting) .*\(from -r \S+ \(line (\d+)\)\)", output, re.M)
    missing = re.findall(r"No matching distribution found for (\S+)", output)
    number = int(processing[-1]) - len(options) if processing else 0
    if not 1 <= number <= len(runtime):
        return None
    line = runtime[number - 1]
    needs = f" (no distribution of {missing[0]} to be found)" if missing else ""
    return (f"{line.where}: '{line.text.strip()}' is built by pip in an isolated environment, and pip "
            f"cannot install its build requirements{needs}; mark the line {MARK}: the build stage "
            "then builds it with the image's own torch and build tools")


def forget_build_stage_urls(out: Path) -> list[str]:
    """Drop the direct_url.json that pip wrote for the build stage's wheels (and its RECORD
    line): it names file:///pip-wheels/..., a mount that exists only during the build, and
    `pip freeze` in the image would print that path instead of NAME==VERSION. Returns the
    dist-info folders changed."""
    changed = []
    for direct_url in sorted(out.rglob("*.dist-info/direct_url.json")):
        try:
            url = json.loads(direct_url.read_text()).get("url", "")
        except (OSError, ValueError, AttributeError):
            continue
        if not str(url).startswith(f"file://{WHEELS_MOUNT}/"):
            continue   # an index's or a link's own URL stays: it is where the package came from
        direct_url.unlink()
        record = direct_url.parent / "RECORD"
        if record.is_file():
            entry = f"{direct_url.parent.name}/direct_url.json"
            kept = [line for line in record.read_text().splitlines(keepends=True)
                    if next(csv.reader([line]), [""])[0] != entry]
            record.write_text("".join(kept))
        changed.append(direct_url.parent.name)
    return changed
