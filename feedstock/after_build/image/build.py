"""The image command: check everything it can first, build in a temp folder beside --output,
rename it into place at the end (a failure leaves nothing half-written)."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from common.owned_folders import make_owned, remove_stale
from feedstock.after_build.image.rootfs import SOURCE_DATE_EPOCH, remove_stale_roots
from ...errors import FeedstockError
from . import environment
from .base import Base, debian_base, given_base, runtime_packages
from .layers import tree_names, unpack_layers, write_layer
from .oci import Layout, apptainer_recipe
from .build_stage import build_wheels
from .build_tools import toolset
from .container import check_python
from .network import reachable
from .envfile import EnvironmentFile, Line, check_torch_specs, read_environment
from .pip_access import PipAccess, pip_access
from .pip_step import pip_layer
from .requirements import PipPlan, check_lines, check_names_in_links, plan, read_requirements
from .tools import require

ARCHIVE = "image.tar"


@dataclass
class ImageRequest:
    channels: list[str]
    flavour: str | None
    python: str | None
    output: Path
    requirements: Path | None = None
    base: str | None = None
    host_pythons: list[Path] = field(default_factory=list)
    find_links: Path | None = None
    engine: str = "podman"
    name: str | None = None
    cuda: str | None = None
    pkgs_dir: Path | None = None   # package cache to keep between runs (default: one per run)
    environment: Path | None = None   # an environment file: channels, dependencies, pip:
    pip_cert: Path | None = None
    wheel_cache: bool = True   # False: compile every build-stage package again
    wheel_cache_dir: Path | None = None   # where the wheels are kept (default: build_stage.wheel_cache())
    compile_cache: Path | None = None   # ccache's folder for the build stage's compiles


@dataclass
class Definition:
    """What the image holds, from the options or an environment file."""
    channels: list[str]
    flavour: str
    python: str | None                 # X.Y for the solve, unless a spec in `specs` pins it
    specs: list[Line]                  # further conda dependencies
    pip: list[Line]                    # pip lines (a requirements file or the pip: section)
    pip_label: str                     # where they come from, for messages
    env_file: EnvironmentFile | None = None


@dataclass
class Result:
    output: Path
    name: str
    manifest_digest: str
    layers: dict[str, str]   # role -> digest
    sizes: dict[str, int]    # role -> uncompressed tar bytes (the base: the given tar)


def _epoch() -> int:
    return int(os.environ.get("SOURCE_DATE_EPOCH") or SOURCE_DATE_EPOCH)


def _definition(opts: ImageRequest) -> Definition:
    if opts.environment is None:
        if not opts.channels or not opts.flavour or not opts.python:
            raise FeedstockError("name --channel, --flavour and --python, or an --environment file")
        pip = read_requirements(opts.requirements) if opts.requirements is not None else []
        return Definition(opts.channels, opts.flavour, opts.python, [], pip, str(opts.requirements))
    clash = [flag for flag, value in (("--channel", opts.channels), ("--flavour", opts.flavour),
                                      ("--requirements", opts.requirements)) if value]
    if clash:
        raise FeedstockError(f"--environment {opts.environment} names the channels, the flavour and the pip "
                             f"lines; drop {', '.join(clash)}")
    env = read_environment(opts.environment)
    if env.python and opts.python and env.python != opts.python:
        raise FeedstockError(f"--python {opts.python}, but {opts.environment} asks for python {env.python}; "
                             "drop one")
    python = None if env.python else opts.python
    if not env.python and not python:
        raise FeedstockError(f"{opts.environment}: no python among the dependencies; add one "
                             "(e.g. '- python=3.11') or give --python")
    return Definition(env.channels, env.flavour, python, env.specs, env.pip, str(opts.environment), env)


def _preflight(opts: ImageRequest, image: Definition, pips: PipPlan) -> tuple[Base | None, PipAccess]:
    """Everything that needs no solve: one line and nothing written."""
    if opts.output.exists() and (not opts.output.is_dir() or any(opts.output.iterdir())):
        raise FeedstockError(f"--output {opts.output} exists and is not empty; remove it or name another")
    tools = ["umoci", "skopeo"]
    if opts.base is None or pips.build:
        tools.append("mmdebstrap")   # the build stage's base is always mmdebstrap's
    access = pip_access(opts.pip_cert)
    if image.pip:
        if "podman" not in Path(opts.engine).name:
            raise FeedstockError(f"the pip steps run in the image with podman run --rootfs; "
                                 f"--engine {opts.engine} cannot (use podman)")
        tools.append(opts.engine)
    if opts.find_links is not None and not opts.find_links.is_dir():
        raise FeedstockError(f"--find-links {opts.find_links}: no such folder")
    if opts.find_links is not None:
        for line in pips.network_lines():
            raise FeedstockError(f"{line.where}: {line.text!r} needs the network, and with --find-links pip "
                                 f"runs without one; drop --find-links (pip then uses the host's network) "
                                 f"or put its wheel or sdist into {opts.find_links}")
    require(*tools)
    for line in pips.network_lines():
        reachable(line)
    base = given_base(opts.base) if opts.base else None
    available = environment.check_flavour(image.channels[0], image.flavour)
    if image.env_file is not None:
        check_torch_specs(image.env_file, available)
    return base, access


def build(opts: ImageRequest, say=print) -> Result:
    # what killed runs left: their partial images beside --output, their mmdebstrap roots
    remove_stale(opts.output.parent, _partial_prefix(opts.output))
    remove_stale_roots()
    image = _definition(opts)
    pips = plan(image.pip)
    base, access = _preflight(opts, image, pips)
    cuda = opts.cuda if image.flavour == "gpu" else None
    records = environment.solve(image.channels, image.flavour, image.python, cuda,
                                [line.text for line in image.specs])
    environment.check_torch_channel(records, image.channels[0])
    torch_version = environment.version_of(records, "pytorch")
    python = ".".join(environment.version_of(records, "python").split(".")[:2])
    check_lines(image.pip, torch_version)
    if opts.find_links is not None:   # before the environment is installed: a typo costs seconds
        check_names_in_links(pips, opts.find_links, {record.name.normalized for record in records})
    # localhost/: podman and docker load it under that name instead of docker.io/library/
    name = opts.name or f"localhost/pytorch-{image.flavour}:{torch_version}-py{python.replace('.', '')}"
    ref = name.rsplit(":", 1)[1] if ":" in name else "latest"
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_owned(opts.output.parent, _partial_prefix(opts.output))
    tmp.chmod(0o755)  # mkdtemp makes it private; the result is an ordinary folder
    try:
        result = _build_in(tmp, opts, image, pips, access, base, records, name, ref, say)
        shutil.rmtree(tmp / "work", ignore_errors=True)
        if opts.output.exists():
            opts.output.rmdir()  # checked empty above
        os.replace(tmp, opts.output)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.output = opts.output
    return result


def _partial_prefix(output: Path) -> str:
    """.NAME.partial-<pid>-<random>: the folder an image is built in, renamed to NAME at the end."""
    return f".{output.name}.partial-"


def _assemble(layout: Layout, base: Base, layers_dir: Path, torch_version: str, say) -> list[str]:
    """The base, torch and environment layers in the OCI layout (umoci gzips each); their roles."""
    say("image: assembling the OCI layout")
    layout.start(base)
    roles = ["base"] if base.kind == "rootfs" else [f"base{i}" for i in range(len(layout.layer_digests()))]
    layout.add_layer(layers_dir / "torch.tar", f"torch {torch_version}: {', '.join(environment.TORCH_PACKAGES)}")
    layout.add_layer(layers_dir / "environment.tar", "the rest of the conda environment")
    return roles + ["torch", "environment"]


def _pip_steps(work: Path, layout: Layout, base: Base, opts: ImageRequest, image: Definition, pips: PipPlan,
               env, access: PipAccess, records: list, epoch: int, say) -> int:
    """The build stage and the pip step on the image's root filesystem; writes the requirements
    layer's tar (returns its size)."""
    layers_dir = work / "layers"
    rootfs = work / "rootfs"
    if base.kind == "rootfs":   # the layers' own tars, uncompressed
        unpack_layers([base.path, layers_dir / "torch.tar", layers_dir / "environment.tar"], rootfs)
    else:
        layout.unpack_rootfs(rootfs)
    # before the slow part: a python that cannot start fails every pip step
    check_python(opts.engine, rootfs, "the image")
    wheels: list[Path] = []
    if pips.build:
        wheels = build_wheels(pips.build, pips.options, env.staging, work, opts.engine, opts.find_links,
                              access, opts.host_pythons, epoch, say, use_cache=opts.wheel_cache,
                              wheel_cache_dir=opts.wheel_cache_dir,
                              tools=toolset(image.flavour, records), channels=image.channels,
                              cuda=opts.cuda if image.flavour == "gpu" else None,
                              pkgs=opts.pkgs_dir or work / "pkgs", compile_cache=opts.compile_cache)
    say(f"image: pip install -r {image.pip_label} in the image ({opts.engine})")
    pip_out = work / "pip-out"
    pip_layer(rootfs, pips.options, pips.runtime, image.pip_label,
              env.torch_version, pip_out, opts.engine, opts.find_links, access, wheels)
    shutil.rmtree(rootfs)
    return write_layer(pip_out, tree_names(pip_out), layers_dir / "requirements.tar", epoch)


def _build_in(tmp: Path, opts: ImageRequest, image: Definition, pips: PipPlan, access: PipAccess,
              base: Base | None, records: list, name: str, ref: str, say) -> Result:
    epoch, work = _epoch(), tmp / "work"
    layers_dir = work / "layers"
    layers_dir.mkdir(parents=True)
    if base is None:
        say("image: base from mmdebstrap (cached after the first time)")
        base = debian_base(opts.host_pythons, runtime_packages(image.flavour))
    say(f"image: installing {len(records)} packages into /opt/env")
    env = environment.install(records, work / "root", opts.pkgs_dir or work / "pkgs")
    sizes = {"base": base.path.stat().st_size if base.kind == "rootfs" else 0}
    sizes["torch"] = write_layer(env.staging, env.torch_names, layers_dir / "torch.tar", epoch)
    sizes["environment"] = write_layer(env.staging, env.rest_names, layers_dir / "environment.tar", epoch)
    layout = Layout(tmp / "oci", ref, epoch)
    roles: list[str] = []
    # over a rootfs base the pip steps run on the layers' own tars, before umoci compresses
    # them: an extension that does not compile or a python that cannot start fails a minute
    # sooner. An OCI base is unpacked from the layout, so that one is assembled first.
    if base.kind != "rootfs":
        roles = _assemble(layout, base, layers_dir, env.torch_version, say)
    if pips.runtime or pips.build:
        sizes["requirements"] = _pip_steps(work, layout, base, opts, image, pips, env, access, records, epoch, say)
    if base.kind == "rootfs":
        roles = _assemble(layout, base, layers_dir, env.torch_version, say)
    if "requirements" in sizes:
        layout.add_layer(layers_dir / "requirements.tar", f"pip install -r {Path(image.pip_label).name}")
        roles.append("requirements")
    layout.configure({"org.opencontainers.image.title": name, "feedstock.torch.version": env.torch_version,
                      "feedstock.flavour": image.flavour, "feedstock.python": env.python_version})
    say(f"image: docker-archive {ARCHIVE}")
    tars = [base.path, *(layers_dir / f"{role}.tar" for role in roles[1:])] if base.kind == "rootfs" else None
    layout.docker_archive(tmp / ARCHIVE, name, tars)
    (tmp / "Apptainer.def").write_text(apptainer_recipe(ARCHIVE, name, image.flavour))
    result = Result(opts.output, name, layout.manifest_digest(), dict(zip(roles, layout.layer_digests())), sizes)
    (tmp / "image.json").write_text(json.dumps(
        {"name": name, "oci_ref": ref, "manifest_digest": result.manifest_digest, "layers": result.layers,
         "torch_version": env.torch_version, "python_version": env.python_version, "flavour": image.flavour},
        indent=2) + "\n")
    return result
