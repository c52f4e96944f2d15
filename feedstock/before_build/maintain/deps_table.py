"""``deps``: the vendored-dependency table (package | upstream | recipe | channel | source).

Upstream versions come from the PyTorch source (a git checkout's submodules and tags, or the
version files a release tarball's submodules carry, and the ``.ci/docker`` scripts) and from the
wheel's METADATA; our pins from the recipes and the pinning file; the channel's newest version
from local ``repodata.json`` files. Versions are compared with py-rattler, never as strings.
"""
from __future__ import annotations

import configparser
import json
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from rattler import Version

from common.nesting import too_deep

from ...atomic_files import replace_files
from ...errors import FeedstockError
from ...text_input import read_json, read_text, read_yaml
from ...layout import Feedstock
from .recipe_lines import get_triton, recipe_files, run_requirements
from .source_tree import SourceFiles, load_source
from .wheel_metadata import WheelMetadata

# the committed table lives in the maintainer docs, between these markers (deps --write-docs)
DOCS_TABLE_FILE = Path("docs") / "maintaining.md"
TABLE_START = "<!-- deps-table:start -->"
TABLE_END = "<!-- deps-table:end -->"

# submodule folder -> conda-forge package, where they differ
SUBMODULE_PACKAGES = {
    "protobuf": "libprotobuf", "abseil-cpp": "libabseil", "googletest": "gtest", "benchmark": "benchmark",
    "eigen": "eigen", "opentelemetry-cpp": "opentelemetry-cpp", "cudnn_frontend": "cudnn-frontend",
    "XNNPACK": "xnnpack", "FP16": "fp16", "FXdiv": "fxdiv", "NNPACK": "nnpack", "cpp-httplib": "cpp-httplib",
}
# variables the .ci/docker scripts set -> package, and the pinning key that pins it
CI_VARIABLES = {"CUDA_VERSION": ("cuda-version", "cuda_compiler_version"),
                "MAGMA_VERSION": ("libmagma", "libmagma_devel"),
                "MKL_VERSION": ("mkl", "mkl")}
TRITON_VERSION_FILE = ".ci/docker/triton_version.txt"
_CI_ASSIGNMENT = re.compile(r"^\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)?)?(?P<var>"
                            + "|".join(CI_VARIABLES) + r")=[\"']?(?P<value>\d+(?:\.\d+)*)", re.M)
# files that carry a submodule's version in a release tarball (no git metadata there)
VERSION_FILES = ("makefiles/version.mk", "CMakeLists.txt", "version.json", "include/fmt/base.h",
                 "include/fmt/core.h", "src/google/protobuf/stubs/common.h", "configure.ac", "VERSION",
                 "version.txt")


@dataclass
class Row:
    package: str
    upstream: str
    recipe: str = ""
    channel: str = ""
    source: str = ""
    flagged: bool = False


# --- versions ------------------------------------------------------------------------------------

def version_in(text: str) -> str | None:
    """The first dotted version number in ``text`` (v2.27.5-1 -> 2.27.5)."""
    match = re.search(r"(\d+(?:\.\d+)+|\d+)", text)
    return match.group(1) if match else None


def _segments(text: str) -> list[int] | None:
    found = version_in(text)
    if not found:
        return None
    try:
        Version(found)
    except Exception:   # rattler's InvalidVersionError: not a version we can compare
        return None
    return [int(part) for part in found.split(".")]


def disagree(upstream: list[str], pinned: list[str]) -> bool:
    """True when our pins and upstream's versions differ in major.minor (to the pin's precision).

    Against an upstream lower bound (``>=1.13.3``, ``>=3.10``) only a pin below it disagrees.
    """
    ups = [s for s in (_segments(u) for u in upstream) if s]
    pins = [s for s in (_segments(p) for p in pinned) if s]
    if not ups or not pins:
        return False
    if len(upstream) == 1 and upstream[0].lstrip().startswith(">="):
        return any(pin[:2] < ups[0][:2] for pin in pins)
    for pin in pins:
        depth = min(2, len(pin))
        if not any(up[:depth] == pin[:depth] for up in ups if len(up) >= depth):
            return True
    return False


def newest(versions: list[str]) -> str:
    parsed = []
    for text in versions:
        try:
            parsed.append((Version(text), text))
        except Exception:
            continue
    return max(parsed)[1] if parsed else ""


# --- upstream: submodules ------------------------------------------------------------------------

def parse_version_file(rel: str, text: str) -> str | None:
    """A version from one of VERSION_FILES, or None when this file does not say."""
    name = rel.rsplit("/", 1)[-1]
    if rel.endswith("makefiles/version.mk"):
        parts = {k: v for k, v in re.findall(r"^NCCL_(MAJOR|MINOR|PATCH)\s*:=\s*(\d+)", text, re.M)}
        if len(parts) == 3:
            return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"
    elif name == "CMakeLists.txt":
        project = re.search(r"^\s*project\s*\(\s*[\w-]+[^)]*?\bVERSION\s+(\d+(?:\.\d+)+)", text, re.M | re.I)
        if project:
            return project.group(1)
        parts = dict(re.findall(r"set\s*\(\s*\w+_VERSION_(MAJOR|MINOR|PATCH|PATCHLEVEL)\s+\"?(\d+)", text, re.I))
        patch = parts.get("PATCH") or parts.get("PATCHLEVEL")
        if "MAJOR" in parts and "MINOR" in parts:
            return ".".join([parts["MAJOR"], parts["MINOR"]] + ([patch] if patch else []))
    elif name in ("base.h", "core.h"):
        match = re.search(r"#\s*define\s+FMT_VERSION\s+(\d+)", text)
        if match:
            number = int(match.group(1))
            return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    elif name == "common.h":
        match = re.search(r"#\s*define\s+GOOGLE_PROTOBUF_VERSION\s+(\d+)", text)
        if match:
            number = int(match.group(1))
            return f"{number // 1000000}.{number // 1000 % 1000}.{number % 1000}"
    elif name == "version.json":
        try:
            data = None if too_deep(text) else json.loads(text)
        except json.JSONDecodeError:
            return None
        for branch in data.values() if isinstance(data, dict) else []:
            if isinstance(branch, dict) and branch.get("protoc_version"):
                return str(branch["protoc_version"])
    elif name == "configure.ac":
        match = re.search(r"AC_INIT\(\s*\[[^\]]*\]\s*,\s*\[(\d+(?:\.\d+)+)", text)
        if match:
            return match.group(1)
    elif name in ("VERSION", "version.txt"):
        return version_in(text.strip().splitlines()[0]) if text.strip() else None
    return None


def _submodule_paths(source: SourceFiles) -> list[str]:
    text = source.text(".gitmodules")
    if not text:
        return sorted({rel.split("/")[0] + "/" + rel.split("/")[1] for rel in source.files
                       if rel.startswith("third_party/") and rel.count("/") >= 2})
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return [parser[s]["path"] for s in parser.sections() if "path" in parser[s]]


def package_of(path: str) -> str:
    folder = path.rstrip("/").rsplit("/", 1)[-1]
    return SUBMODULE_PACKAGES.get(folder, folder.lower())


def version_file_rows(source: SourceFiles) -> list[Row]:
    """One row per submodule whose version files say a version (release tarballs)."""
    rows = []
    for path in _submodule_paths(source):
        for name in VERSION_FILES:
            rel = f"{path}/{name}"
            text = source.text(rel)
            found = parse_version_file(rel, text) if text else None
            if found:
                rows.append(Row(package_of(path), found, source=rel))
                break
    return rows


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def git_submodule_rows(checkout: Path, source: SourceFiles) -> list[Row]:
    """``git submodule status --recursive``; the version from ``git describe --tags`` (else version files)."""
    proc = _git(["submodule", "status", "--recursive"], checkout)
    if proc.returncode != 0:
        raise FeedstockError(f"git submodule status failed in {checkout}: "
                             f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}; is it a PyTorch checkout?")
    rows = []
    for line in proc.stdout.splitlines():
        match = re.match(r"^[ +\-U]?(?P<sha>[0-9a-f]{40}) (?P<path>\S+)", line)
        if not match:
            continue
        path, sha = match.group("path"), match.group("sha")
        if line.startswith("-"):
            rows.append(Row(package_of(path), "", source=f"{path}: not checked out (git submodule update --init)"))
            continue
        described = _git(["describe", "--tags"], checkout / path)
        tag = described.stdout.strip() if described.returncode == 0 else ""
        if tag and version_in(tag):
            rows.append(Row(package_of(path), version_in(tag), source=f"git describe --tags: {tag} ({path})"))
            continue
        for name in VERSION_FILES:
            rel = f"{path}/{name}"
            text = source.text(rel)
            if text and (found := parse_version_file(rel, text)):
                rows.append(Row(package_of(path), found, source=f"{rel} (commit {sha[:12]}, no tag)"))
                break
        else:
            rows.append(Row(package_of(path), sha[:12], source=f"{path}: commit, no tag or version file"))
    return rows


def ci_docker_rows(source: SourceFiles) -> list[Row]:
    """CUDA, MAGMA and MKL versions the .ci/docker scripts install; triton's pin file."""
    found: dict[str, dict[str, str]] = {}
    for rel in sorted(source.files):
        if not rel.startswith(".ci/docker/") or not rel.endswith(".sh"):
            continue
        for match in _CI_ASSIGNMENT.finditer(source.text(rel) or ""):
            found.setdefault(match.group("var"), {}).setdefault(match.group("value"), rel)
    rows = []
    for var, (package, _) in CI_VARIABLES.items():
        if var in found:
            values = sorted(found[var], key=Version)
            files = sorted(set(found[var].values()))
            rows.append(Row(package, ", ".join(values), source=f"{var} in {', '.join(files)}"))
    triton = source.text(TRITON_VERSION_FILE)
    if triton and triton.strip():
        rows.append(Row("triton", triton.strip().splitlines()[0].strip(), source=TRITON_VERSION_FILE))
    return rows


def wheel_rows(metadata: WheelMetadata) -> list[Row]:
    rows = [Row(r.conda_name, r.spec or "(any)", source=f"{metadata.source} Requires-Dist")
            for r in metadata.runtime_requirements()]
    if metadata.triton_version():
        rows.append(Row("triton", metadata.triton_version(), source=f"{metadata.source} Requires-Dist"))
    if metadata.requires_python:
        rows.append(Row("python", metadata.requires_python, source=f"{metadata.source} Requires-Python"))
    return rows


def wanted_for_deps(rel: str) -> bool:
    if rel in (".gitmodules", TRITON_VERSION_FILE) or rel.startswith(".ci/docker/"):
        return True
    return rel.startswith("third_party/") and rel.endswith(VERSION_FILES)


def upstream_rows(source_path: Path | None, metadata: WheelMetadata | None) -> list[Row]:
    rows: list[Row] = []
    if source_path is not None:
        source = load_source(source_path, wanted_for_deps)
        if source.is_git:
            rows += git_submodule_rows(Path(source_path), source)
        else:
            rows += version_file_rows(source)
        rows += ci_docker_rows(source)
    if metadata is not None:
        rows += [r for r in wheel_rows(metadata) if not (r.package == "triton" and any(x.package == "triton" for x in rows))]
    return rows


# --- our pins and the channel ----------------------------------------------------------------------

def our_pins(feedstock: Feedstock) -> dict[str, tuple[list[str], str]]:
    """package -> (pinned versions, where): the pinning files' keys and the recipes' literal pins."""
    pins: dict[str, tuple[list[str], str]] = {}
    for config in feedstock.variant_config_files():
        data = read_yaml(config, str(config.relative_to(feedstock.root))) or {}
        for key, values in data.items():
            if isinstance(values, list) and values and all(isinstance(v, (str, int, float)) for v in values):
                # "3.10.* *_cpython" -> "3.10.*": the version, not the build string
                shown = [str(v).split()[0] for v in values if str(v).strip() not in ("None", "")]
                if shown:
                    pins[str(key)] = (list(dict.fromkeys(shown)), config.relative_to(feedstock.root).as_posix())
    for recipe in recipe_files(feedstock.recipe_dir):
        if (triton := get_triton(recipe)) and "triton" not in pins:
            pins["triton"] = ([triton], recipe.label)
        for name, spec in run_requirements(recipe).items():
            if name not in pins:
                pins[name] = ([spec.split(None, 1)[1] if spec != name else "(any)"], recipe.label)
    return pins


def _pin_for(package: str, pins: dict[str, tuple[list[str], str]]) -> tuple[list[str], str] | None:
    for key in (package, package.replace("-", "_"), f"{package}_devel".replace("-", "_"),
                f"{package}_dev".replace("-", "_")):
        if key in pins:
            return pins[key]
    for variable, (name, key) in CI_VARIABLES.items():
        if name == package and key in pins:
            return pins[key]
    return None


def channel_versions(repodata_files: list[Path]) -> dict[str, str]:
    """package -> newest version across the ``repodata.json`` files."""
    seen: dict[str, list[str]] = {}
    for path in repodata_files:
        try:
            data = read_json(Path(path))
        except FileNotFoundError:
            raise FeedstockError(f"repodata file {path} does not exist; pass a channel's <subdir>/repodata.json")
        if not isinstance(data, dict) or not any(k in data for k in ("packages", "packages.conda")):
            raise FeedstockError(f"{path} has no packages/packages.conda; pass a channel's repodata.json")
        for section in ("packages", "packages.conda"):
            for record in (data.get(section) or {}).values():
                if isinstance(record, dict) and record.get("name") and record.get("version"):
                    seen.setdefault(str(record["name"]), []).append(str(record["version"]))
    return {name: newest(versions) for name, versions in seen.items()}


def build_table(feedstock: Feedstock, source: Path | None, metadata: WheelMetadata | None,
                repodata: list[Path]) -> list[Row]:
    if source is None and metadata is None:
        raise FeedstockError("deps needs --source DIR|TARBALL or --wheel WHEEL (or both)")
    if source is not None and not Path(source).exists():
        raise FeedstockError(f"source {source} does not exist; pass a PyTorch checkout or release tarball")
    rows = upstream_rows(source, metadata)
    pins = our_pins(feedstock)
    channel = channel_versions(repodata)
    for row in rows:
        pin = _pin_for(row.package, pins)
        if pin:
            row.recipe = ", ".join(pin[0])
            row.source += f"; pin: {pin[1]}"
            row.flagged = disagree(row.upstream.split(", "), pin[0])
        row.channel = channel.get(row.package, "")
    return rows


# --- output ------------------------------------------------------------------------------------------

COLUMNS = ("package", "upstream", "recipe", "channel", "source")


def format_markdown(rows: list[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|") or "-"

    lines = ["| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    for row in rows:
        package = f"{row.package} (major.minor differs)" if row.flagged else row.package
        lines.append("| " + " | ".join(cell(v) for v in (package, row.upstream, row.recipe, row.channel, row.source))
                     + " |")
    return "\n".join(lines) + "\n"


def format_json(rows: list[Row]) -> str:
    return json.dumps([asdict(row) for row in rows], indent=2) + "\n"


def write_docs_table(root: Path, table: str) -> bool:
    """Replace the text between the deps-table markers of docs/maintaining.md under ``root``;
    False when it was already current."""
    page = Path(root) / DOCS_TABLE_FILE
    if not page.is_file():
        raise FeedstockError(f"{page} does not exist; run from the feedstock root")
    text = read_text(page, str(DOCS_TABLE_FILE))
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise FeedstockError(f"{DOCS_TABLE_FILE.as_posix()} has no {TABLE_START} ... {TABLE_END} markers; add them "
                             "where the table goes")
    new = text[:start + len(TABLE_START)] + "\n" + table + text[end:]
    if new == text:
        return False
    replace_files({page: new})
    return True
