#!/usr/bin/env python3
"""A private podman configuration for machines like the feedstock's development machines.

There podman 4.3 runs containers only with the vfs storage driver, the cgroupfs cgroup manager,
runc (crun fails on the cgroup-v1 hybrid) and ulimits within the machine's own (it lacks
CAP_SYS_RESOURCE, and podman's default limits ask for more). Those are the machine's quirks, not
build-locally's business, so they live in a containers.conf and a storage.conf of their own:

    eval "$(python3 devtools/podman_config.py ~/.config/feedstock-podman)"
    python3 build-locally.py CONFIG --engine podman

writes both files (storage under DIR/storage, DIR/run) and prints the two exports that point
podman at them. A machine whose podman already works needs none of this.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from localbuild.atomic import write_atomically  # noqa: E402

CONTAINERS_CONF = """\
# written by devtools/podman_config.py: this machine's quirks (see that script)
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
"""

STORAGE_CONF = """\
# written by devtools/podman_config.py
[storage]
driver = "vfs"
graphroot = "{graphroot}"
runroot = "{runroot}"
"""


def _write(path: Path, text: str) -> None:
    write_atomically(path, text)


def write_config(folder: Path) -> dict[str, str]:
    """Write containers.conf and storage.conf into `folder`; return the variables to export."""
    folder = folder.expanduser().resolve()
    for sub in ("storage", "run"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    _write(folder / "containers.conf", CONTAINERS_CONF)
    _write(folder / "storage.conf", STORAGE_CONF.format(graphroot=folder / "storage",
                                                         runroot=folder / "run"))
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
