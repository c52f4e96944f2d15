"""What a PyTorch wheel's METADATA says: requirements (as conda names), Python support, triton."""
from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, replace
from email.parser import Parser
from pathlib import Path

from ...errors import FeedstockError

# PyPI name (normalised) -> conda-forge name, where they differ
CONDA_NAMES = {
    "typing-extensions": "typing_extensions",
    "opt-einsum": "opt_einsum",
}
# installed from conda packages (cuda-*, nccl, ...) instead of these wheels
PROVIDED_BY_CONDA_PREFIXES = ("nvidia-", "cuda-")
TRITON_NAMES = ("triton", "pytorch-triton", "pytorch-triton-rocm")

_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;]*?)\s*(?:;\s*(?P<marker>.*))?$")
_CLASSIFIER_PYTHON = re.compile(r"^Programming Language :: Python :: (3\.\d+)$")


@dataclass(frozen=True)
class Requirement:
    pypi_name: str      # normalised (lower case, '-')
    spec: str           # e.g. ">=1.13.3" or "==3.7.1" or ""
    marker: str         # environment marker, "" if none

    @property
    def conda_name(self) -> str:
        return CONDA_NAMES.get(self.pypi_name, self.pypi_name)

    @property
    def lower_bound(self) -> str | None:
        """The version of a ``>=`` or ``==`` clause, the one a conda lower bound follows."""
        match = re.search(r"(>=|==|~=)\s*([0-9][^,\s]*)", self.spec)
        return match.group(2) if match else None

    @property
    def conda_spec(self) -> str:
        """``name >=X`` (or bare ``name``): the form the recipe's run requirements use."""
        bound = self.lower_bound
        return f"{self.conda_name} >={bound}" if bound else self.conda_name


@dataclass(frozen=True)
class WheelMetadata:
    name: str
    version: str
    requires_python: str
    classifier_pythons: tuple[str, ...]
    requirements: tuple[Requirement, ...]     # unconditional and platform-marked; extras left out
    source: str                               # where it was read, for the table's source column

    def runtime_requirements(self) -> list[Requirement]:
        """What ``pip install torch`` pulls in (extras left out), less what conda provides otherwise:
        the CUDA wheels (cuda-* packages) and triton (its own pin). Markers such as
        ``python_version >= "3.12"`` are kept: conda's package is the same for every Python."""
        return [r for r in self.requirements
                if not r.pypi_name.startswith(PROVIDED_BY_CONDA_PREFIXES) and r.pypi_name not in TRITON_NAMES]

    def triton_version(self) -> str | None:
        for req in self.requirements:
            if req.pypi_name in TRITON_NAMES and req.lower_bound:
                return req.lower_bound
        return None

    def min_python(self) -> str | None:
        match = re.search(r">=\s*(3\.\d+)", self.requires_python)
        return match.group(1) if match else None


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_metadata(text: str, source: str) -> WheelMetadata:
    message = Parser().parsestr(text, headersonly=True)
    requirements = []
    for line in message.get_all("Requires-Dist") or []:
        match = _REQUIREMENT.match(line)
        if not match:
            continue
        marker = (match.group("marker") or "").strip()
        if re.search(r"\bextra\s*==", marker):
            continue
        spec = match.group("spec").strip().strip("()").replace(" ", "")
        requirements.append(Requirement(normalise(match.group("name")), spec, marker))
    pythons = tuple(m.group(1) for c in message.get_all("Classifier") or []
                    if (m := _CLASSIFIER_PYTHON.match(c.strip())))
    return WheelMetadata(name=str(message.get("Name", "")), version=str(message.get("Version", "")),
                         requires_python=str(message.get("Requires-Python", "")),
                         classifier_pythons=pythons, requirements=tuple(requirements), source=source)


def read_wheel(path: Path) -> WheelMetadata:
    """The METADATA of the ``*.dist-info`` in wheel ``path``."""
    path = Path(path)
    if not path.is_file():
        raise FeedstockError(f"wheel {path} does not exist; pass a torch-*.whl file")
    try:
        with zipfile.ZipFile(path) as wheel:
            names = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise FeedstockError(f"{path} has no single *.dist-info/METADATA; pass a wheel (torch-*.whl)")
            text = wheel.read(names[0]).decode("utf-8")
    except zipfile.BadZipFile:
        raise FeedstockError(f"{path} is not a wheel (not a zip file); pass a torch-*.whl file")
    metadata = parse_metadata(text, source="")
    # short enough for a table cell: "torch 2.13.0+cpu METADATA"
    return replace(metadata, source=f"{metadata.name or path.name} {metadata.version} METADATA".strip())
