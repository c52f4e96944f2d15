"""The OCI layout (umoci), its docker-archive copy (skopeo) and an Apptainer recipe beside them.

umoci adds each layer tar verbatim (it gzips it) and records the config; every timestamp it
would take from the clock is given instead, so the manifest digest follows the inputs alone.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from .base import Base
from .environment import PREFIX
from .tools import run

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Layout:
    """An OCI layout folder being built, with the one tag this image gets."""

    def __init__(self, path: Path, ref: str, epoch: int) -> None:
        self.path, self.ref, self.epoch = path, ref, epoch

    @property
    def image(self) -> str:
        return f"{self.path}:{self.ref}"

    def start(self, base: Base) -> None:
        """An empty image, or a copy of the base layout retagged as ours."""
        if base.kind == "oci":
            shutil.copytree(base.path, self.path, symlinks=True)
            if base.ref != self.ref:
                run(["umoci", "tag", "--image", f"{self.path}:{base.ref}", self.ref], "umoci tag")
                run(["umoci", "rm", "--image", f"{self.path}:{base.ref}"], "umoci rm")
            return
        run(["umoci", "init", "--layout", str(self.path)], "umoci init")
        run(["umoci", "new", "--image", self.image], "umoci new")
        self.add_layer(base.path, f"base: {base.path.name}")

    def add_layer(self, tar: Path, comment: str) -> None:
        run(["umoci", "raw", "add-layer", "--image", self.image, "--history.created", iso(self.epoch),
             "--history.created_by", "python -m feedstock image", "--history.comment", comment, str(tar)],
            f"umoci raw add-layer ({comment})")

    def configure(self, labels: dict[str, str]) -> None:
        args = ["umoci", "config", "--image", self.image, "--created", iso(self.epoch),
                "--history.created", iso(self.epoch), "--history.created_by", "python -m feedstock image",
                "--history.comment", "the conda environment activated",
                "--config.env", f"PATH={PREFIX}/bin:{SYSTEM_PATH}", "--config.env", f"CONDA_PREFIX={PREFIX}",
                "--config.env", "LANG=C.UTF-8", "--config.cmd", f"{PREFIX}/bin/python"]
        for key, value in sorted(labels.items()):
            args += ["--config.label", f"{key}={value}"]
        run(args, "umoci config")
        run(["umoci", "gc", "--layout", str(self.path)], "umoci gc")

    def manifest_digest(self) -> str:
        index = json.loads((self.path / "index.json").read_text())
        for entry in index["manifests"]:
            if entry.get("annotations", {}).get("org.opencontainers.image.ref.name") == self.ref:
                return entry["digest"]
        raise KeyError(self.ref)

    def layer_digests(self) -> list[str]:
        algo, hexdigest = self.manifest_digest().split(":")
        manifest = json.loads((self.path / "blobs" / algo / hexdigest).read_text())
        return [layer["digest"] for layer in manifest["layers"]]

    def unpack_rootfs(self, dest: Path) -> None:
        """The image's root filesystem, to run a step in it."""
        run(["umoci", "raw", "unpack", "--image", self.image, str(dest)], "umoci raw unpack")

    def docker_archive(self, dest: Path, name: str) -> None:
        run(["skopeo", "copy", "--quiet", f"oci:{self.image}", f"docker-archive:{dest}:{name}"],
            "skopeo copy to a docker-archive")


def apptainer_recipe(archive_name: str, name: str) -> str:
    """An Apptainer definition that builds a SIF from the docker-archive beside it."""
    return f"""\
# Apptainer / SingularityCE recipe for {name}, written by python -m feedstock image.
# Build it next to {archive_name}:  apptainer build pytorch.sif Apptainer.def
Bootstrap: docker-archive
From: {archive_name}

%environment
    export CONDA_PREFIX={PREFIX}
    export PATH={PREFIX}/bin:$PATH

%runscript
    exec {PREFIX}/bin/python "$@"

%test
    {PREFIX}/bin/python -c "import torch; print(torch.__version__, torch.ones(2).sum().item())"
"""
