"""The real images the image tests share (tests/feedstock/after_build/image/conftest.py builds
them once for the package): A (requirements six and torch==2.13.0) and B (requirements idna, on
the base tar A's run cached, given with --base), all of the real PyTorch 2.13.0 CPU
packages (the session's `wheelbuild`). The channel's python is a virtual environment of this
machine's CPython 3.11, so the mmdebstrap base gets that install (--host-python). pip installs
from a folder of wheels (--find-links): no network in the image.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.podman import Podman, podman_unavailable, private_podman

TOOLS = ("umoci", "skopeo", "oci-image-tool", "podman", "runc", "mmdebstrap")
PYTHON = "3.11"          # the real wheel is cp311
APP_WHEELS = ("six==1.17.0", "idna==3.10")


@dataclass
class Image:
    out: Path
    info: dict
    seconds: float

    @property
    def layers(self) -> dict[str, str]:
        return self.info["layers"]

    @property
    def oci(self) -> str:
        return f"oci:{self.out / 'oci'}:{self.info['oci_ref']}"


@dataclass
class Rig:
    work: Path
    podman: Podman
    channels: list[Path]
    wheels: Path
    host_python: Path
    a: Image
    b: Image

    def image(self, *args: str, output: Path | None = None) -> subprocess.CompletedProcess:
        common = [a for c in self.channels for a in ("--channel", str(c))]
        return self.command(*common, "--flavour", "cpu", "--python", PYTHON, *args, output=output)

    def command(self, *args: str, output: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        """python -m feedstock image ARGS --output OUTPUT, with this rig's podman and its one
        package cache: every image of the rig installs the same packages, unpacked once."""
        pkgs = () if "--pkgs-dir" in args else ("--pkgs-dir", str(self.work / "pkgs"))
        return image_command(self.podman, *args, *pkgs, output=output or self.work / "refused", env=env)


def image_command(podman: Podman, *args: str, output: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """python -m feedstock image ARGS --output OUTPUT, with that podman's configuration."""
    return subprocess.run([sys.executable, "-m", "feedstock", "image", *args, "--output", str(output)],
                          cwd=REPO_ROOT, env={**podman.env, **(env or {})}, capture_output=True, text=True,
                          timeout=3600)


def build_image(rig: Rig, name: str, *args: str) -> Image:
    started = time.monotonic()
    proc = rig.image("--find-links", str(rig.wheels), *args, output=rig.work / name)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return Image(rig.work / name, json.loads((rig.work / name / "image.json").read_text()),
                 time.monotonic() - started)


def build_and_load_env_image(podman: Podman, env_file: Path, links: Path, output: Path, *extra: str,
                             env: dict[str, str]) -> dict:
    """`python -m feedstock image --environment ENV_FILE` with a fresh wheel cache, loaded into
    podman: the gpu and rocm build-stage modules' image. Returns the image.json info, the command's
    stdout and its seconds."""
    started = time.monotonic()
    proc = image_command(podman, "--environment", str(env_file), "--find-links", str(links), *extra,
                         "--no-wheel-cache", output=output, env=env)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    info = json.loads((output / "image.json").read_text())
    loaded = podman.run("load", "-i", str(output / "image.tar"), timeout=1800).stdout
    assert info["name"] in loaded, loaded
    return {"info": info, "stdout": proc.stdout, "seconds": seconds}


def run_in_image(podman: Podman, name: str, *args: str) -> str:
    """`podman run --rm --network=none NAME ARGS`: its stdout."""
    return podman.run("run", "--rm", "--network=none", name, *args, timeout=600).stdout


def skip_without_image_tools() -> None:
    """Skip with the reason where a tool the image command needs is missing or podman cannot run."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install {' '.join(missing)}; .ci/run does)")
    reason = podman_unavailable()
    if reason:
        pytest.skip(reason)


def make_rig(work: Path, wheelbuild: dict, realbuild_toolchain: dict, cpythons: dict[str, Path]) -> Rig:
    """The rig in `work`; skips with the reason where a tool is missing. Its podman store and images
    stay with the run's temp folders (the rig is shared by the workers: tests/conftest.py)."""
    skip_without_image_tools()
    from feedstock.after_build.image.base import debian_base

    podman = private_podman(work / "podman")
    wheels = work / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "-d", str(wheels), *APP_WHEELS], check=True, timeout=300)
    (work / "req-a.txt").write_text("six==1.17.0\ntorch==2.13.0  # the image's own: fine\n")
    (work / "req-b.txt").write_text("idna==3.10\n")
    rig = Rig(work, podman, [wheelbuild["build"].output_dir, realbuild_toolchain["toolchain"].channel],
              wheels, cpythons[PYTHON], None, None)
    a_args = ("--requirements", str(work / "req-a.txt"), "--host-python", str(rig.host_python))
    # no second build of A: a build twice giving one manifest digest is E and E again
    # (test_build_stage.py, the longer path), and B repeats A's base, torch and environment layers
    rig.a = build_image(rig, "a", *a_args)
    base_tar = debian_base([rig.host_python]).path  # cached by A's run: the same bytes
    rig.b = build_image(rig, "b", "--requirements", str(work / "req-b.txt"), "--base", str(base_tar))
    print(f"image builds: {rig.a.seconds:.0f}s, {rig.b.seconds:.0f}s")
    return rig


