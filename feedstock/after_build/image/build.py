"""The image command: check everything it can first, build in a temp folder beside --output,
rename it into place at the end (a failure leaves nothing half-written)."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from feedstock.after_build.image.rootfs import SOURCE_DATE_EPOCH
from ...errors import FeedstockError
from . import environment
from .base import Base, debian_base, given_base
from .layers import tree_names, write_layer
from .oci import Layout, apptainer_recipe
from .requirements import check_requirements, pip_layer
from .tools import require

ARCHIVE = "image.tar"


@dataclass
class Options:
    channels: list[str]
    flavour: str
    python: str
    output: Path
    requirements: Path | None = None
    base: str | None = None
    host_pythons: list[Path] = field(default_factory=list)
    find_links: Path | None = None
    engine: str = "podman"
    name: str | None = None
    cuda: str | None = None
    pkgs_dir: Path | None = None   # package cache to keep between runs (default: one per run)


@dataclass
class Result:
    output: Path
    name: str
    manifest_digest: str
    layers: dict[str, str]   # role -> digest
    sizes: dict[str, int]    # role -> uncompressed tar bytes (the base: the given tar)


def _epoch() -> int:
    return int(os.environ.get("SOURCE_DATE_EPOCH") or SOURCE_DATE_EPOCH)


def _preflight(opts: Options) -> Base | None:
    """Everything that needs no solve: one line and nothing written."""
    if opts.output.exists() and (not opts.output.is_dir() or any(opts.output.iterdir())):
        raise FeedstockError(f"--output {opts.output} exists and is not empty; remove it or name another")
    tools = ["umoci", "skopeo"]
    if opts.base is None:
        tools.append("mmdebstrap")
    if opts.requirements is not None:
        if "podman" not in Path(opts.engine).name:
            raise FeedstockError(f"--requirements runs pip in the image with podman run --rootfs; "
                                 f"--engine {opts.engine} cannot (use podman)")
        tools.append(opts.engine)
        if not opts.requirements.is_file():
            raise FeedstockError(f"--requirements {opts.requirements}: no such file")
    if opts.find_links is not None and not opts.find_links.is_dir():
        raise FeedstockError(f"--find-links {opts.find_links}: no such folder")
    require(*tools)
    base = given_base(opts.base) if opts.base else None
    environment.check_flavour(opts.channels[0], opts.flavour)
    return base


def build(opts: Options, say=print) -> Result:
    base = _preflight(opts)
    cuda = opts.cuda if opts.flavour == "gpu" else None
    records = environment.solve(opts.channels, opts.flavour, opts.python, cuda)
    torch_version = environment.version_of(records, "pytorch")
    if opts.requirements is not None:
        check_requirements(opts.requirements, torch_version)
    # localhost/: podman and docker load it under that name instead of docker.io/library/
    name = opts.name or f"localhost/pytorch-{opts.flavour}:{torch_version}-py{opts.python.replace('.', '')}"
    ref = name.rsplit(":", 1)[1] if ":" in name else "latest"
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{opts.output.name}.partial-", dir=opts.output.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the result is an ordinary folder
    try:
        result = _build_in(tmp, opts, base, records, name, ref, say)
        shutil.rmtree(tmp / "work", ignore_errors=True)
        if opts.output.exists():
            opts.output.rmdir()  # checked empty above
        os.replace(tmp, opts.output)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.output = opts.output
    return result


def _build_in(tmp: Path, opts: Options, base: Base | None, records: list, name: str, ref: str,
              say) -> Result:
    epoch, work = _epoch(), tmp / "work"
    layers_dir = work / "layers"
    layers_dir.mkdir(parents=True)
    if base is None:
        say("image: base from mmdebstrap (cached after the first time)")
        base = debian_base(opts.host_pythons)
    say(f"image: installing {len(records)} packages into /opt/env")
    env = environment.install(records, work / "root", opts.pkgs_dir or work / "pkgs")
    sizes = {"base": base.path.stat().st_size if base.kind == "rootfs" else 0}
    sizes["torch"] = write_layer(env.staging, env.torch_names, layers_dir / "torch.tar", epoch)
    sizes["environment"] = write_layer(env.staging, env.rest_names, layers_dir / "environment.tar", epoch)
    layout = Layout(tmp / "oci", ref, epoch)
    say("image: assembling the OCI layout")
    layout.start(base)
    roles = ["base"] if base.kind == "rootfs" else [f"base{i}" for i in range(len(layout.layer_digests()))]
    layout.add_layer(layers_dir / "torch.tar", f"torch {env.torch_version}: {', '.join(environment.TORCH_PACKAGES)}")
    layout.add_layer(layers_dir / "environment.tar", "the rest of the conda environment")
    roles += ["torch", "environment"]
    if opts.requirements is not None:
        say(f"image: pip install -r {opts.requirements} in the image ({opts.engine})")
        rootfs = work / "rootfs"
        layout.unpack_rootfs(rootfs)
        pip_out = work / "pip-out"
        pip_layer(rootfs, opts.requirements, env.torch_version, pip_out, opts.engine, opts.find_links)
        shutil.rmtree(rootfs)
        sizes["requirements"] = write_layer(pip_out, tree_names(pip_out), layers_dir / "requirements.tar", epoch)
        layout.add_layer(layers_dir / "requirements.tar", f"pip install -r {opts.requirements.name}")
        roles.append("requirements")
    layout.configure({"org.opencontainers.image.title": name, "feedstock.torch.version": env.torch_version,
                      "feedstock.flavour": opts.flavour, "feedstock.python": env.python_version})
    say(f"image: docker-archive {ARCHIVE}")
    layout.docker_archive(tmp / ARCHIVE, name)
    (tmp / "Apptainer.def").write_text(apptainer_recipe(ARCHIVE, name))
    result = Result(opts.output, name, layout.manifest_digest(), dict(zip(roles, layout.layer_digests())), sizes)
    (tmp / "image.json").write_text(json.dumps(
        {"name": name, "oci_ref": ref, "manifest_digest": result.manifest_digest, "layers": result.layers,
         "torch_version": env.torch_version, "python_version": env.python_version, "flavour": opts.flavour},
        indent=2) + "\n")
    return result
