#!/usr/bin/env python3
"""A private podman configuration for machines like the feedstock's development machines.

There podman 4.3 runs containers only with the cgroupfs cgroup manager, runc (crun fails on the
cgroup-v1 hybrid) and ulimits within the machine's own (it lacks CAP_SYS_RESOURCE, and podman's
default limits ask for more). Those are the machine's quirks, not build-locally's business, so
they live in a containers.conf and a storage.conf of their own:

    eval "$(python3 devtools/podman_config.py ~/.config/feedstock-podman)"
    python3 build-locally.py CONFIG --engine podman

writes both files (storage under DIR/storage, DIR/run) and prints the two exports that point
podman at them. A machine whose podman already works needs none of this.

The storage driver is overlay where podman's overlay driver works on DIR's filesystem (probed
with a throw-away store there): a container then starts without copying its image (an 800 MB
image: 0.5-0.6 s against 1.0-1.5 s with vfs). Elsewhere (DIR on overlayfs, as inside many
containers, or a filesystem without d_type) it is vfs, and one line on stderr says why. A store
that DIR already holds keeps its driver: podman refuses to open it with another one.

The run folder (podman's runroot) is DIR/run while that path is at most 50 bytes long; a longer
one makes every `podman run` wait out podman's 20 s conmon timeout when the container exits
(podman 4.3, measured: 50 bytes 0.13 s, 51 bytes 20.2 s), so then it is /tmp/feedstock-podman-
followed by a hash of DIR.

Each store also gets its own podman temporary folder (RUN/libpod, not the machine's /run/libpod)
and network folder (DIR/networks, not /etc/containers/networks): resetting one store then never
looks like a reboot to another store's running containers, nor removes its networks.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common.atomic_files import write_atomically  # noqa: E402

CONTAINERS_CONF = """\
# written by devtools/podman_config.py: this machine's quirks (see that script)
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
{own_folders}"""
# Podman's temporary files (its "is this a fresh boot" marker, containers' exit files) and its
# networks, per store: by default every store on the machine shares /run/libpod and
# /etc/containers/networks, and a `podman system reset` of one store then looked like a reboot to
# every other (a running container lost its exit code) and removed every network.
OWN_FOLDERS = """tmp_dir = "{tmp_dir}"

[network]
network_config_dir = "{networks}"
"""

STORAGE_CONF = """\
# written by devtools/podman_config.py
[storage]
driver = "{driver}"
graphroot = "{graphroot}"
runroot = "{runroot}"
"""
DRIVERS = ("overlay", "vfs")   # the first that works; vfs works everywhere, copying
PROBE_TIMEOUT_S = 120
RUNROOT_MAX = 50   # bytes: see the module's docstring


def containers_conf_text(folder: Path) -> str:
    """The containers.conf for the store in `folder`, with its own temporary and network folders.
    A store podman made before with the shared ones keeps them: podman takes tmp_dir from the
    store's database over the configuration (podman 4.3, checked)."""
    return CONTAINERS_CONF.format(own_folders=OWN_FOLDERS.format(tmp_dir=runroot(folder) / "libpod",
                                                                 networks=folder / "networks"))


def _write(path: Path, text: str) -> None:
    write_atomically(path, text)


def runroot(folder: Path) -> Path:
    """DIR/run, or a short folder of DIR's own under /tmp when that path is too long."""
    run = folder / "run"
    if len(os.fsencode(run)) <= RUNROOT_MAX:
        return run
    return Path("/tmp") / f"feedstock-podman-{hashlib.sha256(os.fsencode(folder)).hexdigest()[:12]}"


def store_driver(graphroot: Path) -> str | None:
    """The driver of the image store in graphroot, if podman has made one there."""
    for driver in DRIVERS:
        if any((graphroot / f"{driver}-{kind}").is_dir() for kind in ("layers", "images")):
            return driver
    return None


def overlay_problem(folder: Path, containers_conf: Path) -> str | None:
    """None when podman opens an overlay store in `folder` (on its filesystem, in a throw-away
    store, its own runroot too: podman caches the probe's answer there); else why not."""
    if shutil.which("podman") is None:
        return "podman not found"
    with tempfile.TemporaryDirectory(prefix=".overlay-probe-", dir=folder) as tmp:
        conf = Path(tmp) / "storage.conf"
        conf.write_text(STORAGE_CONF.format(driver="overlay", graphroot=Path(tmp) / "storage",
                                            runroot=Path(tmp) / "run"))
        env = dict(os.environ, CONTAINERS_CONF=str(containers_conf),
                   CONTAINERS_STORAGE_CONF=str(conf))
        try:
            proc = subprocess.run(["podman", "info", "--format", "{{.Store.GraphDriverName}}"],
                                  env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"podman info: {err}"
    if proc.returncode == 0 and proc.stdout.strip() == "overlay":
        return None
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"podman info exited {proc.returncode}"


def choose_driver(folder: Path, containers_conf: Path) -> tuple[str, str | None]:
    """(storage driver, the line to show when it is vfs although the caller might expect
    overlay, else None)."""
    existing = store_driver(folder / "storage")
    if existing == "overlay":
        return existing, None
    problem = overlay_problem(folder, containers_conf)
    if existing == "vfs":
        return "vfs", None if problem else (
            f"podman_config: keeping vfs: {folder / 'storage'} holds a vfs store (remove it, "
            "e.g. podman system reset with this configuration, for overlay)")
    if problem:
        return "vfs", f"podman_config: overlay does not work in {folder} ({problem}); using vfs"
    return "overlay", None


def write_config(folder: Path) -> dict[str, str]:
    """Write containers.conf and storage.conf into `folder`, the storage driver overlay where
    it works there, else vfs with one line on stderr; return the variables to export."""
    folder = folder.expanduser().resolve()
    (folder / "storage").mkdir(parents=True, exist_ok=True)
    runroot(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
    (folder / "networks").mkdir(exist_ok=True)
    _write(folder / "containers.conf", containers_conf_text(folder))
    driver, note = choose_driver(folder, folder / "containers.conf")
    if note:
        print(" ".join(note.split()), file=sys.stderr)
    _write(folder / "storage.conf", STORAGE_CONF.format(driver=driver, graphroot=folder / "storage",
                                                         runroot=runroot(folder)))
    return {"CONTAINERS_CONF": str(folder / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(folder / "storage.conf")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the configuration and the image store go")
    args = parser.parse_args(argv)
    try:
        variables = write_config(args.folder)
    except OSError as err:
        print(f"error: cannot write the podman configuration into {args.folder}: {err.strerror}",
              file=sys.stderr)
        return 2
    for name, value in variables.items():
        print(f"export {name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
