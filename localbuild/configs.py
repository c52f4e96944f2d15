"""The configs in ``.ci_support/``: what each one builds, described for people."""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import ci_yaml
from common.driver import DriverMissing, driver_module
from .errors import EXIT_PREFLIGHT, EXIT_USAGE, LocalBuildError
from common.input_files import NotUtf8Text, too_many_variants
from common.path_kinds import folder_problem

CI_SUPPORT = ".ci_support"

# Rough free-disk needs in GB (build tree + build/host/test environments + packages), by
# backend: a fixed part, plus a part per Python the config builds. GPU megabuilds need most.
_DISK_BASE_GB = {"cpu": 30, "cuda": 80, "rocm": 110}
_DISK_PER_PYTHON_GB = {"cpu": 4, "cuda": 8, "rocm": 8}

_NAME_PLATFORM = re.compile(r"^(linux|osx|win)_(64|aarch64|arm64|ppc64le)")


def python_label(raw: str) -> str:
    """'3.12' for a python variant value such as '3.12.* *_cpython'; '3.13t' when free-threaded."""
    match = re.match(r"\s*(\d+\.\d+)", raw)
    label = match.group(1) if match else raw.split()[0]
    if re.search(r"_cp\d+t\b|freethreading", raw):
        label += "t"
    return label


@dataclass(frozen=True)
class PythonEntry:
    """One entry of the config's ``python`` list, e.g. ``3.12.* *_cpython`` -> label ``3.12``."""

    index: int
    raw: str
    label: str


@dataclass
class CiConfig:
    name: str
    path: Path
    doc: ci_yaml.CiYaml

    @property
    def values(self) -> dict[str, Any]:
        return self.doc.data

    def first(self, key: str) -> str | None:
        value = self.values.get(key)
        if isinstance(value, list):
            value = value[0] if value else None
        if value is None or isinstance(value, (list, dict)):
            return None
        return str(value)

    def all_values(self, key: str) -> list[str]:
        value = self.values.get(key)
        if value is None:
            return []
        if isinstance(value, list):
            return [str(item) for item in value if not isinstance(item, (list, dict))]
        return [str(value)]

    @property
    def platform(self) -> str:
        target = self.first("target_platform")
        if target:
            return target
        match = _NAME_PLATFORM.match(self.name)
        return f"{match.group(1)}-{match.group(2)}" if match else "unknown"

    @property
    def build_platform(self) -> str:
        """Where the build runs: conda-smithy's build_platform for cross-compiled configs."""
        return self.first("build_platform") or self.platform

    @property
    def docker_image(self) -> str | None:
        return self.first("docker_image")

    @property
    def gpu(self) -> tuple[str, str | None]:
        """('cuda', '12.9'), ('rocm', '6.4') or ('cpu', None): the driver's decision
        (megabuild.build_env.gpu_backend), the one the build itself makes."""
        variant = {key: self.first(key) or "" for key in ("gpu_backend", "cuda_compiler_version", "rocm_version")}
        feedstock_root = self.path.parent.parent
        try:
            build_env = driver_module(feedstock_root, "build_env")
        except DriverMissing as exc:
            raise LocalBuildError(f"{exc}; build-locally.py asks it which GPU a config builds",
                                  EXIT_PREFLIGHT) from None
        backend = build_env.gpu_backend(variant)
        if backend == "cpu":
            return "cpu", None
        version = variant["cuda_compiler_version" if backend == "cuda" else "rocm_version"]
        return backend, None if build_env.is_none(version) else version.strip()

    @property
    def blas(self) -> str | None:
        return self.first("blas_impl")

    @property
    def megabuild(self) -> bool:
        return (self.first("megabuild") or "").lower() == "true"

    @property
    def pythons(self) -> list[PythonEntry]:
        entries = []
        for index, raw in enumerate(self.all_values("python")):
            entries.append(PythonEntry(index, raw, python_label(raw)))
        return entries

    @property
    def channel_sources(self) -> list[str]:
        channels: list[str] = []
        for entry in self.all_values("channel_sources"):
            channels += [part.strip() for part in entry.split(",") if part.strip()]
        return channels or ["conda-forge"]

    @property
    def disk_estimate_gb(self) -> int:
        backend = self.gpu[0]
        return _DISK_BASE_GB[backend] + _DISK_PER_PYTHON_GB[backend] * max(1, len(self.pythons))

    def zip_group(self, key: str) -> list[str]:
        """The keys zipped with ``key`` (including it), or just [key]."""
        for group in self.values.get("zip_keys") or []:
            if isinstance(group, list) and key in group:
                return [str(item) for item in group]
        return [key]

    def description(self) -> str:
        backend, version = self.gpu
        parts = [self.platform, f"{backend} {version}" if version else backend]
        if self.blas:
            parts.append(self.blas)
        pythons = self.pythons
        if pythons:
            parts.append("py " + _python_range([entry.label for entry in pythons]))
        if self.megabuild:
            parts.append("megabuild")
        parts.append(f"~{self.disk_estimate_gb} GB disk")
        return ", ".join(parts)


def _python_range(labels: list[str]) -> str:
    """['3.10', '3.11', '3.12'] -> '3.10-3.12'; gaps or free-threaded builds -> comma list."""
    try:
        minors = [int(label.split(".")[1]) for label in labels]
        majors = {label.split(".")[0] for label in labels}
    except (IndexError, ValueError):
        return ",".join(labels)
    contiguous = len(majors) == 1 and minors == list(range(minors[0], minors[0] + len(minors)))
    if len(labels) > 2 and contiguous:
        return f"{labels[0]}-{labels[-1]}"
    return ",".join(labels)


def ci_support_dir(feedstock_root: Path) -> Path:
    return feedstock_root / CI_SUPPORT


def config_names(feedstock_root: Path) -> list[str]:
    """Names of the configs (file stems), sorted; no parsing."""
    directory = ci_support_dir(feedstock_root)
    problem = folder_problem(directory)
    if problem and problem != "does not exist":   # a file, a symlink loop: one line, not a traceback
        raise LocalBuildError(f"{CI_SUPPORT} {problem}; generate it with `python -m feedstock rerender`",
                              EXIT_USAGE)
    entries = [] if problem else os.listdir(directory)
    # every entry, a folder or a broken link included: it is that config, refused when read
    names = sorted(entry[:-5] for entry in entries
                   if entry.endswith(".yaml") and not entry.startswith("clobber_"))
    if not names:
        raise LocalBuildError(
            f"no configs in {directory}; generate them with `python -m feedstock rerender`",
            EXIT_USAGE)
    return names


# keys of a job file whose lists are not values to vary over
NOT_VARIANT_KEYS = {"zip_keys", "extend_keys", "pin_run_as_build", "ignore_version"}


def load_config(feedstock_root: Path, name: str) -> CiConfig:
    path = ci_support_dir(feedstock_root) / f"{name}.yaml"
    rel = _relative(str(path), feedstock_root)
    try:
        doc = ci_yaml.load(path)
    except ci_yaml.CiYamlError as exc:
        raise LocalBuildError(f"cannot parse {_relative(exc.path, feedstock_root)} line {exc.line}: "
                              f"{exc.reason}; regenerate it with `python -m feedstock rerender`",
                              EXIT_USAGE) from None
    except NotUtf8Text as exc:
        where = str(exc).removeprefix(str(path))   # ":LINE: byte ..."
        raise LocalBuildError(f"{rel}{where}; regenerate it with `python -m feedstock rerender`",
                              EXIT_USAGE) from None
    except OSError as exc:
        raise LocalBuildError(f"cannot read {rel}: {exc.strerror}; "
                              "regenerate it with `python -m feedstock rerender`", EXIT_USAGE) from None
    if not doc.data.get("target_platform"):
        raise LocalBuildError(f"{rel} has no target_platform (is it "
                              "empty?); regenerate it with `python -m feedstock rerender`", EXIT_USAGE)
    _check_combinations(doc.data, rel)
    return CiConfig(name, path, doc)


def _check_combinations(data: dict, rel: str) -> None:
    """A job's variants are the product of its keys' values, a zip_keys group counting once:
    over MAX_VARIANTS, the build tools would render for hours. One line naming the widest keys."""
    zipped = [group for group in data.get("zip_keys") or [] if isinstance(group, list)]
    in_zip = {key for group in zipped for key in group}
    axes = [(key, len(value)) for key, value in data.items()
            if isinstance(value, list) and key not in in_zip and key not in NOT_VARIANT_KEYS]
    axes += [("/".join(map(str, group)), len(data.get(group[0]) or [])) for group in zipped
             if group and isinstance(data.get(group[0]), list)]
    problem = too_many_variants(axes)
    if problem:
        raise LocalBuildError(f"{rel}: its variants would have {problem}; regenerate it with "
                              "`python -m feedstock rerender`", EXIT_USAGE)


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def host_platform() -> str:
    """The conda subdir of this machine, e.g. linux-64, osx-arm64."""
    machine = os.uname().machine.lower() if hasattr(os, "uname") else ""
    arch = {"x86_64": "64", "amd64": "64", "aarch64": "aarch64", "arm64": "arm64",
            "ppc64le": "ppc64le"}.get(machine, machine)
    if sys.platform.startswith("linux"):
        return f"linux-{arch}"
    if sys.platform == "darwin":
        return f"osx-{arch}"
    if sys.platform.startswith("win"):
        return "win-64"
    return f"{sys.platform}-{arch}"
