"""Conda platforms (subdirs) and the selector namespace conda-build evaluates per platform."""
from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Mapping

# every subdir conda knows; conda-build derives the os / arch selector names from this list
KNOWN_SUBDIRS = (
    "emscripten-wasm32", "wasi-wasm32", "freebsd-64", "linux-32", "linux-64", "linux-aarch64",
    "linux-armv6l", "linux-armv7l", "linux-ppc64", "linux-ppc64le", "linux-riscv64",
    "linux-s390x", "osx-64", "osx-arm64", "win-32", "win-64", "win-arm64", "zos-z",
)
# the arch part of a subdir -> its selector name (conda-build's naming)
ARCH_SELECTOR = {"32": "x86", "64": "x86_64"}

# the compilers conda-build assumes when a variant config names none
DEFAULT_COMPILERS = {
    "linux": {"c": "gcc", "cxx": "gxx", "fortran": "gfortran"},
    "osx": {"c": "clang", "cxx": "clangxx", "fortran": "gfortran"},
    "win": {"c": "vs2017", "cxx": "vs2017", "fortran": "gfortran"},
}


@dataclass(frozen=True)
class Platform:
    """One target platform, e.g. ``Platform("linux-64")``; ``name`` is conda-smithy's ``linux_64``."""

    subdir: str

    @property
    def os(self) -> str:
        return self.subdir.split("-", 1)[0]

    @property
    def arch(self) -> str:
        return self.subdir.split("-", 1)[1]

    @property
    def name(self) -> str:
        return self.subdir.replace("-", "_")

    @classmethod
    def from_name(cls, name: str) -> "Platform":
        os_part, _, arch = name.partition("_")
        return cls(f"{os_part}-{arch}")

    @property
    def is_known(self) -> bool:
        return self.subdir in KNOWN_SUBDIRS


def _as_selector_value(value: Any) -> Any:
    """Variant values are strings; selectors compare numbers and booleans (conda-build converts)."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            if value.lower() in ("true", "false"):
                return value.lower() == "true"
    return value


def _python_number(python: str) -> int:
    major, minor = python.split(" ")[0].split(".")[:2]
    return int(f"{major}{minor}")


def environ_with(overrides: Mapping[str, str] | None) -> Mapping[str, str]:
    """The process environment plus ``overrides`` (what the tools export while rendering)."""
    return {**os.environ, **(overrides or {})} if overrides else os.environ


def selector_namespace(
    platform: Platform,
    variant: Mapping[str, Any] | None = None,
    build_platform: Platform | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The names a ``# [selector]`` can use on ``platform`` with ``variant``'s values.

    Mirrors conda-build: os and arch names, ``linux64``/``unix``/..., ``py``/``np``,
    ``build_platform``, ``environ``, then every variant key not already defined.
    """
    variant = dict(variant or {})
    env = environ if environ is not None else os.environ
    plat = platform.subdir
    ns: dict[str, Any] = {
        "linux32": plat == "linux-32",
        "linux64": plat == "linux-64",
        "arm": plat.startswith("linux-arm"),
        "unix": plat.startswith(("linux-", "osx-", "emscripten-")),
        "win32": plat == "win-32",
        "win64": plat == "win-64",
        # selectors may read os.environ / environ; both see the same (possibly overlaid) mapping
        "os": SimpleNamespace(environ=env, path=os.path, sep=os.sep, getenv=env.get),
        "environ": env,
        "nomkl": bool(int(env.get("FEATURE_NOMKL", "0") or 0)),
    }
    subdirs = set(KNOWN_SUBDIRS) | {plat}
    for os_name in {s.split("-")[0] for s in subdirs}:
        ns[os_name] = plat.startswith(f"{os_name}-")
    for arch in {s.split("-")[1] for s in subdirs}:
        ns[ARCH_SELECTOR.get(arch, arch)] = plat.endswith(f"-{arch}")
        if arch == "32":
            ns["x86"] = plat.endswith(("-32", "-64"))
    python = variant.get("python", "3.12")
    if not isinstance(python, str):
        python = list(python)[0]
    ns["py"] = _python_number(python)
    ns["py3k"] = python.startswith("3")
    ns["py2k"] = python.startswith("2")
    for old in (26, 27, 33, 34, 35, 36):
        ns[f"py{old}"] = ns["py"] == old
    numpy = variant.get("numpy", "1.26")
    ns["np"] = int("".join(str(numpy).split(".")[:2]))
    ns["pl"] = variant.get("perl", "5.26.2")
    ns["lua"] = variant.get("lua", "5")
    ns["luajit"] = str(ns["lua"])[0] == "2"
    ns["build_platform"] = (build_platform or platform).subdir
    for key, value in variant.items():
        if key not in ns:
            ns[key] = _as_selector_value(value)
    return ns


def known_selector_names() -> set[str]:
    """Names every selector namespace defines, whatever the platform or variant."""
    return set(selector_namespace(Platform("linux-64"))) | {"True", "False", "None"}
