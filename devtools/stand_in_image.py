#!/usr/bin/env python3
"""Build a stand-in for a config's build image, offline, and tag it with the config's image name.

conda-forge's build images (quay.io/condaforge/...) cannot be pulled where no registry is
reachable. This script makes an image that runs localbuild/in_container/build_steps.sh's rattler-build path
without the public channel, so that `build-locally.py CONFIG --engine podman --tool
rattler-build --channel DIR` builds for real in a container:

- a minimal Debian rootfs from mmdebstrap (the Debian mirror is the only network it needs)
  with the compilers and build tools a local toolchain channel wraps (gcc, g++, make, cmake,
  ninja, pkg-config, ccache) and patchelf, which rattler-build relinks with;
- py-rattler-build and py-rattler (the versions requirements-dev.txt pins) in a virtual
  environment at /opt/rattler-build, named by RATTLER_BUILD_PYTHON in the image;
- each --host-python install copied to the same path (without site-packages and tests): the
  `python` packages of tests/support/toolchain.py's channel are virtual environments of it.

The channel itself is not in the image: give it to build-locally with --channel (a local folder
is mounted at its own path). The rootfs tar is cached under ~/.cache/pytorch-feedstock (or
$FEEDSTOCK_IMAGE_CACHE) by its inputs, so a second image build only imports it (seconds).

    python3 devtools/stand_in_image.py CONFIG --host-python ~/.pyenv/versions/3.11.7/bin/python3.11
"""
from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from localbuild.configs import config_names, load_config  # noqa: E402
from feedstock.after_build.image.rootfs import (DPKG_EXCLUDES, SOURCE_DATE_EPOCH, SUITE, RootfsError,  # noqa: E402
                               cache_dir, cache_key, copy_home_hook, debian_rootfs)

PACKAGES = ("bash", "coreutils", "findutils", "grep", "sed", "tar", "gzip", "bzip2", "xz-utils",
            "file", "gcc", "g++", "make", "cmake", "ninja-build", "pkg-config", "ccache",
            "patchelf", "python3", "python3-venv", "ca-certificates")
TOOL_PINS = ("py-rattler-build", "py-rattler")
VENV = "/opt/rattler-build"


class ImageError(Exception):
    """One line for the user; exit 2."""


def tool_pins(requirements: Path = ROOT / "requirements-dev.txt") -> list[str]:
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", requirements.read_text(), re.MULTILINE))
    missing = [name for name in TOOL_PINS if name not in pins]
    if missing:
        raise ImageError(f"{requirements} pins no {', '.join(missing)}")
    return [f"{name}=={pins[name]}" for name in TOOL_PINS]


def python_home(interpreter: Path) -> tuple[Path, str]:
    """(install prefix, version) of a host CPython."""
    try:
        out = subprocess.run([str(interpreter), "-c", "import sys, platform; "
                              "print(sys.base_prefix); print(platform.python_version())"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.split()
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
        raise ImageError(f"--host-python {interpreter}: cannot run it ({err})") from None
    return Path(out[0]), out[1]


def rootfs_key(homes: list[tuple[Path, str]], pins: list[str]) -> str:
    inputs = {"suite": SUITE, "packages": PACKAGES, "pins": pins, "epoch": SOURCE_DATE_EPOCH,
              "excludes": DPKG_EXCLUDES,
              "homes": [[str(path), version] for path, version in homes], "venv": VENV}
    return cache_key(inputs)


def download_tools(pins: list[str], dest: Path) -> None:
    """The wheels, for Debian's Python 3.11, from pip's index (an offline mirror will do)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                           "--only-binary=:all:", "--python-version", "3.11",
                           "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                           "--platform", "manylinux2014_x86_64", "-d", str(dest), *pins],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise ImageError(f"pip download {' '.join(pins)} failed: {proc.stderr.strip()[-300:]}")


def build_rootfs(target: Path, homes: list[tuple[Path, str]], pins: list[str]) -> None:
    """mmdebstrap's minimal Debian plus the tools (feedstock.after_build.image.rootfs: temp file, then renamed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheels = Path(tmp) / "wheels"
        download_tools(pins, wheels)
        hooks = [f'mkdir -p "$1/tmp/wheels" && cp {wheels}/*.whl "$1/tmp/wheels/"',
                 f'chroot "$1" python3 -m venv {VENV}',
                 f'chroot "$1" {VENV}/bin/python -m pip install --quiet --no-index '
                 f'--no-cache-dir --find-links /tmp/wheels {" ".join(pins)}',
                 'rm -rf "$1/tmp/wheels"']
        hooks += [copy_home_hook(home) for home, _ in homes]
        try:
            debian_rootfs(target, PACKAGES, hooks)
        except RootfsError as err:
            raise ImageError(str(err)) from None


def import_image(engine: str, rootfs: Path, tag: str) -> None:
    changes = [f"ENV RATTLER_BUILD_PYTHON={VENV}/bin/python", "ENV LANG=C.UTF-8",
               'CMD ["/bin/bash"]']
    command = [engine, "import", *[arg for change in changes for arg in ("--change", change)],
               str(rootfs), tag]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"{engine} import failed: {proc.stderr.strip()[-300:]}")


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt   # SIGTERM cleans up as Ctrl-C does


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="config name in .ci_support/ (its docker_image is the tag)")
    parser.add_argument("--host-python", action="append", type=Path, default=[], metavar="EXE",
                        help="a host CPython whose install the image gets at the same path")
    parser.add_argument("--engine", default="podman", help="podman (default) or docker")
    parser.add_argument("--tag", help="image name instead of the config's docker_image")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        if args.config not in config_names(ROOT):
            raise ImageError(f"config {args.config!r} not found in {ROOT / '.ci_support'}")
        tag = args.tag or load_config(ROOT, args.config).docker_image
        if shutil.which(args.engine) is None:
            raise ImageError(f"{args.engine} not found; install podman or pass --engine docker")
        homes = [python_home(exe) for exe in args.host_python]
        pins = tool_pins()
        rootfs = cache_dir() / f"rootfs-{rootfs_key(homes, pins)}.tar"
        if rootfs.is_file():
            print(f"stand-in image: base rootfs from the cache ({rootfs})")
        else:
            print(f"stand-in image: mmdebstrap {SUITE} with {len(PACKAGES)} packages -> {rootfs}")
            build_rootfs(rootfs, homes, pins)
        import_image(args.engine, rootfs, tag)
    except ImageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:   # the temporary folders went with their `with` blocks
        print("error: stand-in image interrupted; nothing was kept (no rootfs tar, no image)",
              file=sys.stderr)
        return 130
    print(f"stand-in image: tagged {tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
