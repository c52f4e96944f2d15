"""An environment file (conda's environment.yml, what cotainr and conda users write) as an
image's definition: `channels` in order, conda `dependencies`, and a `pip:` section that is
installed after the conda environment exists.

Only what an image can honour is accepted: `name` and `prefix` are ignored (the environment is
always /opt/env), any other top-level key is refused, since silently dropping it would build
another image than the file describes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ...errors import FeedstockError
from ...text_input import load_yaml, read_text

KEYS = ("name", "prefix", "channels", "dependencies")
METAPACKAGES = {"pytorch-cpu": "cpu", "pytorch-gpu": "gpu", "pytorch-rocm": "rocm"}
# conda names that are our channel's torch: another version of one would replace it
TORCH_CONDA_NAMES = ("pytorch", "libtorch", "libtorch-cuda-linalg")


@dataclass(frozen=True)
class Line:
    where: str    # "env.yml:12", for messages
    text: str


@dataclass
class EnvironmentFile:
    path: Path
    channels: list[str]
    flavour: str
    python: str | None                                  # "3.11" where the file pins one
    specs: list[Line] = field(default_factory=list)    # conda match specs besides the flavour and pip
    pip: list[Line] = field(default_factory=list)


def _channel(value: str, folder: Path) -> str:
    """A relative path is relative to the file's folder, so the file works from any directory."""
    if value.startswith("file://"):
        return value[len("file://"):]
    if value.startswith(("./", "../")):
        return str((folder / value).resolve())
    return str(Path(value).expanduser()) if value.startswith("~") else value


def _spec(line: Line):
    import rattler

    try:
        return rattler.MatchSpec(line.text)
    except Exception as err:  # rattler's parse errors have no common base class
        raise FeedstockError(f"{line.where}: {line.text!r} is not a conda match spec "
                             f"({' '.join(str(err).split())[:120]})") from None


def _nodes(text: str, label: str) -> dict[str, yaml.Node]:
    """The top-level keys' nodes (load_yaml has already refused invalid YAML)."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        raise FeedstockError(f"{label}: not an environment file (a mapping with channels and "
                             "dependencies is expected)")
    return {key.value: value for key, value in root.value}


def _strings(node: yaml.Node, label: str, what: str) -> list[Line]:
    if not isinstance(node, yaml.SequenceNode):
        raise FeedstockError(f"{label}:{node.start_mark.line + 1}: {what} must be a list")
    lines = []
    for item in node.value:
        if not isinstance(item, yaml.ScalarNode) or not str(item.value).strip():
            raise FeedstockError(f"{label}:{item.start_mark.line + 1}: an item of {what} must be a string")
        lines.append(Line(f"{label}:{item.start_mark.line + 1}", str(item.value).strip()))
    return lines


def read_environment(path: Path) -> EnvironmentFile:
    """The file, checked: channels, exactly one flavour of our pytorch, valid match specs."""
    label = str(path)
    try:
        text = read_text(path, f"--environment {path}")
    except FileNotFoundError:
        raise FeedstockError(f"--environment {path}: no such file") from None
    if not isinstance(load_yaml(text, label, strings=True), dict):
        raise FeedstockError(f"{label}: not an environment file (a mapping with channels and "
                             "dependencies is expected)")
    nodes = _nodes(text, label)
    unknown = sorted(set(nodes) - set(KEYS))
    if unknown:
        raise FeedstockError(f"{label}: unknown key {unknown[0]!r} (an image takes {', '.join(KEYS)})")
    for key in ("channels", "dependencies"):
        if key not in nodes:
            raise FeedstockError(f"{label}: no {key}; list our channel first under channels and "
                                 "pytorch-cpu, pytorch-gpu or pytorch-rocm under dependencies")
    channels = [_channel(line.text, path.parent) for line in _strings(nodes["channels"], label, "channels")
                if line.text != "nodefaults"]
    if not channels:
        raise FeedstockError(f"{label}: channels is empty; list our channel (e.g. build_artifacts) first")
    deps = nodes["dependencies"]
    if not isinstance(deps, yaml.SequenceNode):
        raise FeedstockError(f"{label}:{deps.start_mark.line + 1}: dependencies must be a list")
    specs: list[Line] = []
    pip: list[Line] = []
    for item in deps.value:
        where = f"{label}:{item.start_mark.line + 1}"
        if isinstance(item, yaml.MappingNode):
            keys = [key.value for key, _ in item.value]
            if keys != ["pip"]:
                raise FeedstockError(f"{where}: only a pip: section may be a mapping among the dependencies")
            pip += _strings(item.value[0][1], label, "the pip: section")
        elif isinstance(item, yaml.ScalarNode) and str(item.value).strip():
            specs.append(Line(where, str(item.value).strip()))
        else:
            raise FeedstockError(f"{where}: a dependency must be a conda match spec or the pip: section")
    flavours = [(line, METAPACKAGES[_spec(line).name.normalized]) for line in specs
                if _spec(line).name.normalized in METAPACKAGES]
    if not flavours:
        raise FeedstockError(f"{label}: no pytorch-cpu, pytorch-gpu or pytorch-rocm among the dependencies; "
                             "name the flavour of our channel's pytorch (e.g. '- pytorch-cpu')")
    if len(flavours) > 1:
        raise FeedstockError(f"{flavours[1][0].where}: {flavours[1][0].text!r} asks for a second flavour "
                             f"next to {flavours[0][0].text!r} ({flavours[0][0].where}); keep one")
    python = None
    for line in specs:
        spec = _spec(line)
        if spec.name.normalized == "python":
            found = re.search(r"(\d+)\.(\d+)", str(spec.version or ""))
            if not found:
                raise FeedstockError(f"{line.where}: {line.text!r}: name the Python version "
                                     "(e.g. python=3.11)")
            python = f"{found.group(1)}.{found.group(2)}"
    rest = [line for line in specs if _spec(line).name.normalized not in METAPACKAGES]
    if pip and not any(_spec(line).name.normalized == "pip" for line in rest):
        rest.append(Line(label, "pip"))  # conda users list it; the pip step needs it either way
    return EnvironmentFile(path, channels, flavours[0][1], python, rest, pip)


def check_torch_specs(env: EnvironmentFile, available: dict[str, set[str]]) -> None:
    """A dependency naming our torch packages with a version our first channel does not have
    would make the solver take another channel's torch: refused, naming the line."""
    import rattler

    for line in env.specs:
        spec = _spec(line)
        name = spec.name.normalized
        if name == "torch":
            raise FeedstockError(f"{line.where}: {line.text!r}: conda's torch is 'pytorch', which the "
                                 f"image already has from {env.channels[0]}; drop the line")
        if name not in TORCH_CONDA_NAMES or spec.version is None or name not in available:
            continue
        versions = sorted(available[name])
        wanted = rattler.VersionSpec(str(spec.version))
        if not any(wanted.matches(rattler.Version(v)) for v in versions):
            have = ", ".join(versions)
            raise FeedstockError(f"{line.where}: {line.text!r} would replace our channel's {name} {have}; "
                                 f"drop the line or accept {have}")
