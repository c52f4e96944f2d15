"""The OCI layout (umoci), its docker-archive copy (skopeo) and an Apptainer recipe beside them.

umoci adds each layer tar verbatim (it gzips it) and records the config; every timestamp it
would take from the clock is given instead, so the manifest digest follows the inputs alone.
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import time
from pathlib import Path

from ...errors import FeedstockError
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

    def config_blob(self) -> bytes:
        algo, hexdigest = self.manifest_digest().split(":")
        manifest = json.loads((self.path / "blobs" / algo / hexdigest).read_text())
        algo, hexdigest = manifest["config"]["digest"].split(":")
        return (self.path / "blobs" / algo / hexdigest).read_bytes()

    def docker_archive(self, dest: Path, name: str, layer_tars: list[Path] | None = None) -> None:
        """`docker save`'s format, for `docker load`, `podman load` and Apptainer. Given every
        layer's uncompressed tar (over a rootfs base, the build still has them), they go in as
        they are: skopeo would gunzip the layout's blobs again (a third of a CPU image's build).
        Else skopeo copies the layout."""
        if layer_tars is None:
            run(["skopeo", "copy", "--quiet", f"oci:{self.image}", f"docker-archive:{dest}:{name}"],
                "skopeo copy to a docker-archive")
            return
        write_docker_archive(dest, name, self.config_blob(), layer_tars, self.epoch)


def write_docker_archive(dest: Path, name: str, config: bytes, layer_tars: list[Path], epoch: int) -> None:
    """A docker-archive of the image config and the uncompressed layer tars, in order: each
    tar is checked against the config's diff_ids (what a loader checks) as it is copied in."""
    diff_ids = json.loads(config)["rootfs"]["diff_ids"]
    if len(diff_ids) != len(layer_tars):
        raise FeedstockError(f"the image config lists {len(diff_ids)} layers, the build has {len(layer_tars)} tars")
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_names = [diff_id.split(":", 1)[1] + ".tar" for diff_id in diff_ids]
    manifest = json.dumps([{"Config": config_name, "RepoTags": [name], "Layers": layer_names}]).encode()

    def member(arcname: str, size: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(arcname)
        info.size, info.mtime, info.mode = size, epoch, 0o644
        return info

    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as archive:
        archive.addfile(member(config_name, len(config)), io.BytesIO(config))
        for layer, arcname, diff_id in zip(layer_tars, layer_names, diff_ids):
            with layer.open("rb") as source:
                hashing = _Hashing(source)
                archive.addfile(member(arcname, layer.stat().st_size), hashing)
            if f"sha256:{hashing.digest.hexdigest()}" != diff_id:
                raise FeedstockError(f"{layer.name} is not the layer the image config names ({diff_id})")
        archive.addfile(member("manifest.json", len(manifest)), io.BytesIO(manifest))


class _Hashing:
    """A file read through sha256, as tarfile copies it."""

    def __init__(self, source) -> None:
        self.source, self.digest = source, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.digest.update(data)
        return data


# how `apptainer run/exec` reaches the host's accelerator, per flavour
DEVICE_FLAGS = {"cpu": "", "gpu": " --nv", "rocm": " --rocm"}
DEVICE_NOTES = {
    "cpu": "",
    "gpu": ("#   --nv binds the host's NVIDIA driver (libcuda.so, nvidia-smi) into the container: the image\n"
            "#   brings the CUDA libraries, never the driver, and needs a driver of its CUDA version or newer.\n"),
    "rocm": ("#   --rocm binds the host's ROCm driver stack and /dev/kfd, /dev/dri: the packages use the\n"
             "#   system ROCm, as the build image's /opt/rocm, so the host's ROCm must match the image's.\n"),
}


def apptainer_recipe(archive_name: str, name: str, flavour: str = "cpu") -> str:
    """An Apptainer definition that builds a SIF from the docker-archive beside it, with the
    steps an HPC site takes in its comments (nothing here runs Apptainer: said in the file)."""
    flag = DEVICE_FLAGS.get(flavour, "")
    return f"""\
# Apptainer / SingularityCE recipe for {name}, written by python -m feedstock image.
#
# Turning the archive into a SIF, in this folder, on a machine with Apptainer >= 1.1:
#   apptainer build pytorch.sif Apptainer.def
#   (or, without this recipe's %environment and %test: apptainer build pytorch.sif docker-archive://{archive_name})
# - No root is needed: a docker-archive bootstrap with no %post builds unprivileged; where the
#   site's Apptainer is older or set up without user namespaces, add --fakeroot.
# - The build unpacks every layer: point APPTAINER_TMPDIR (and APPTAINER_CACHEDIR) at a file
#   system with room for {archive_name} twice, not a small /tmp on a login node.
# - Copy the SIF to the parallel file system; compute nodes then need only the SIF.
# Running it:
#   apptainer run{flag} pytorch.sif -c "import torch; print(torch.__version__)"
#   apptainer exec{flag} --bind /scratch pytorch.sif python train.py
{DEVICE_NOTES.get(flavour, "")}#
# Not proven here: Apptainer cannot be installed on the machines this feedstock is developed and
# tested on, so this recipe is written from Apptainer's documentation and has never been built by
# the feedstock's tests; the docker-archive beside it has (podman and docker load it).
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
