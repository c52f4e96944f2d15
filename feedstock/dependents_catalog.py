"""recipe/dependents.yaml: each dependent described once (source, kind, flavour, tests)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


from .errors import FeedstockError
from .text_input import read_yaml

CATALOG = Path("recipe") / "dependents.yaml"
KINDS = ("pip-wheel", "conda-sdist", "conda-wheel")
FLAVOURS = ("cpu", "gpu", "any")


@dataclass(frozen=True)
class Source:
    url: str
    sha256: str

    @property
    def file_name(self) -> str:
        return self.url.rsplit("/", 1)[-1].split("#")[0]


@dataclass(frozen=True)
class Dependent:
    name: str
    version: str
    kind: str
    flavour: str
    torch: str
    imports: tuple[str, ...]
    test_files: tuple[str, ...] = ()
    test_pyargs: tuple[str, ...] = ()
    test_requires: tuple[str, ...] = ()
    test_env: dict[str, str] = field(default_factory=dict)
    build_env: dict[str, str] = field(default_factory=dict)
    source: Source | None = None
    channel: bool = False
    build_number: int = 0   # not in the catalog: a rebuild of a noarch package counts up

    @property
    def how_built(self) -> str:
        return {"pip-wheel": "pip wheel", "conda-sdist": "rattler-build sdist",
                "conda-wheel": "rattler-build wheel"}[self.kind]


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FeedstockError(f"{where} must be a list of strings")
    return tuple(value)


def _entry(raw: dict, path: Path) -> Dependent:
    name = raw.get("name")
    where = f"{path}: dependent {name!r}"
    for key in ("name", "version", "kind", "flavour", "torch"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise FeedstockError(f"{where} needs a string '{key}'")
    if raw["kind"] not in KINDS:
        raise FeedstockError(f"{where}: kind {raw['kind']!r} is not one of {', '.join(KINDS)}")
    if raw["flavour"] not in FLAVOURS:
        raise FeedstockError(f"{where}: flavour {raw['flavour']!r} is not one of {', '.join(FLAVOURS)}")
    problem = version_spec_problem(raw["torch"])
    if problem:
        raise FeedstockError(f"{where}: torch {raw['torch']!r} is not a version spec ({problem}); "
                             "write one as conda does, e.g. '2.14.*' or '>=2.0,<2.15'")
    source = None
    if raw.get("source") is not None:
        src = raw["source"]
        if not isinstance(src, dict) or not src.get("url") or len(str(src.get("sha256", ""))) != 64:
            raise FeedstockError(f"{where}: source needs a url and a 64-digit sha256")
        source = Source(str(src["url"]), str(src["sha256"]))
    elif raw["kind"] != "pip-wheel":
        raise FeedstockError(f"{where}: a {raw['kind']} dependent needs a source (url, sha256)")
    tests = raw.get("tests") or {}
    files, pyargs = _strings(tests.get("files"), f"{where} tests.files"), _strings(tests.get("pyargs"), f"{where} tests.pyargs")
    if not files and not pyargs:
        raise FeedstockError(f"{where} has no tests (tests.files or tests.pyargs)")
    return Dependent(name=raw["name"], version=raw["version"], kind=raw["kind"], flavour=raw["flavour"],
                     torch=raw["torch"], imports=_strings(raw.get("imports"), f"{where} imports"),
                     test_files=files, test_pyargs=pyargs,
                     test_requires=_strings(tests.get("requires"), f"{where} tests.requires"),
                     test_env={str(k): str(v) for k, v in (tests.get("env") or {}).items()},
                     build_env={str(k): str(v) for k, v in (raw.get("build_env") or {}).items()},
                     source=source, channel=bool(raw.get("channel", False)))


def version_spec_problem(spec: str) -> str:
    """'' when `spec` is a conda version spec of numbered versions (`2.14.*`, `>=2.0,<2.15`),
    else why not. rattler parses it; a word it takes for a version (`banana`) is refused too."""
    from rattler import VersionSpec

    if re.match(r"\s*[A-Za-z]", spec):
        return "it starts with a name: give only the versions, e.g. '>=2.0,<2.15'"
    try:
        VersionSpec(spec)
    except Exception as err:  # rattler raises one InvalidVersionSpecError per bad spec
        return "rattler: " + (" ".join(str(err).split())[:120] or "unparsable")
    for part in re.split(r"[|,]", spec):
        version = re.sub(r"^\s*(==|!=|<=|>=|~=|<|>|=)?\s*", "", part).strip()
        if version != "*" and not re.match(r"\d", version):
            return f"{version!r} is not a version"
    return ""


def load_catalog(path: Path) -> list[Dependent]:
    """Every dependent of the file, checked; FeedstockError names the first bad entry."""
    try:
        data = read_yaml(path)
    except FileNotFoundError:
        raise FeedstockError(f"cannot read the dependents file {path}: it does not exist") from None
    if data is not None and not isinstance(data, dict):
        raise FeedstockError(f"{path} must be a mapping with a 'dependents:' list, not a "
                             f"{type(data).__name__}; see recipe/dependents.yaml")
    entries = (data or {}).get("dependents")
    if not isinstance(entries, list):
        raise FeedstockError(f"{path} has no 'dependents:' list")
    dependents = [_entry(raw, path) for raw in entries]
    names = [d.name for d in dependents]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise FeedstockError(f"{path}: dependent {doubled[0]!r} is described twice")
    return dependents


def dependents_test_dir(catalog: Path) -> Path:
    """Where the catalog's test files live (recipe/dependents/)."""
    return catalog.parent / "dependents"
