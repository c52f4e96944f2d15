"""The shapes conda-forge.yml's settings may take, as conda-smithy's schema (ConfigModel in
conda_smithy/schema.py) allows them: a nested list where a format is expected passes neither
conda-smithy nor us, and the line says which setting and what it takes.

Only the shape is checked here; which keys exist is layout.FORGE_CONFIG_KEYS, and provider,
build_platform and github_actions' keys are checked where they are read."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from .errors import FeedstockError

# what pydantic's lax mode turns into a bool, besides true and false themselves
BOOL_WORDS = ("0", "1", "true", "false", "yes", "no", "on", "off", "t", "f", "y", "n")


@dataclass(frozen=True)
class Shape:
    """One value's allowed shape: `accepts` says yes or no; `says` is what the error names."""
    says: str
    accepts: Callable[[object], bool]


def _is_int(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or \
        (isinstance(value, str) and value.strip().lstrip("+-").isdigit())


def _is_bool(value: object) -> bool:
    return isinstance(value, bool) or value in (0, 1) or \
        (isinstance(value, str) and value.strip().lower() in BOOL_WORDS)


def _one_of(*choices: object) -> Shape:
    return Shape(f"one of {', '.join(dict.fromkeys(str(c) for c in choices))}",
                 lambda value: not isinstance(value, bool) and value in choices)


STRING = Shape("a string", lambda value: isinstance(value, str))
INTEGER = Shape("a whole number", _is_int)
BOOLEAN = Shape("true or false", _is_bool)
STRINGS = Shape("a list of strings", lambda value: isinstance(value, list)
                and all(isinstance(item, str) for item in value))
MAPPING = Shape("a mapping", lambda value: isinstance(value, dict))
STRING_MAPPING = Shape("a mapping of names to strings", lambda value: isinstance(value, dict)
                       and all(isinstance(item, str) for item in value.values()))

# top-level settings: their shape (null always means "the default")
TOP_LEVEL: Mapping[str, Shape] = {
    "bot": MAPPING, "conda_build": MAPPING, "linter": MAPPING, "github": MAPPING,
    "docker": MAPPING, "azure": MAPPING, "os_version": MAPPING, "templates": STRING_MAPPING,
    "appveyor": MAPPING, "circle": MAPPING, "drone": MAPPING, "travis": MAPPING,
    "woodpecker": MAPPING, "workflow_settings": MAPPING, "matrix": MAPPING,
    "conda_build_tool": _one_of("conda-build", "conda-build+classic",
                                "conda-build+conda-libmamba-solver", "mambabuild", "rattler-build"),
    "conda_install_tool": _one_of("conda", "mamba", "micromamba", "pixi"),
    "conda_solver": _one_of("libmamba", "classic"),
    "channel_priority": _one_of("strict", "flexible", "disabled"),
    "test": _one_of("all", "native", "native_and_emulated"),
    "conda_forge_output_validation": BOOLEAN, "build_with_mambabuild": BOOLEAN,
    "private_upload": BOOLEAN, "test_on_native_only": BOOLEAN,
    "idle_timeout_minutes": INTEGER, "clone_depth": INTEGER,
    "recipe_dir": STRING, "package": STRING, "upload_on_branch": STRING, "config_version": STRING,
    "exclusive_config_file": STRING, "compiler_stack": STRING, "min_py_ver": STRING,
    "max_py_ver": STRING, "min_r_ver": STRING, "max_r_ver": STRING,
    "skip_render": STRINGS, "choco": STRINGS, "secrets": STRINGS,
    "remote_ci_setup": Shape("a string or a list of strings",
                             lambda value: STRING.accepts(value) or STRINGS.accepts(value)),
    "noarch_platforms": Shape("a platform name or a list of them",
                              lambda value: STRING.accepts(value) or STRINGS.accepts(value)),
    "shellcheck": MAPPING, "github_actions": MAPPING,
}
# settings inside a section, where conda-smithy's schema names them
NESTED: Mapping[tuple[str, str], Shape] = {
    ("conda_build", "pkg_format"): _one_of("tar", 1, 2, "1", "2"),
    ("conda_build", "zstd_compression_level"): INTEGER,
    ("conda_build", "error_overlinking"): BOOLEAN,
    ("linter", "skip"): STRINGS,
    ("shellcheck", "enabled"): BOOLEAN,
    ("docker", "executable"): STRING, ("docker", "fallback_image"): STRING,
    ("docker", "command"): STRING, ("docker", "interactive"): BOOLEAN,
    ("github", "user_or_org"): STRING, ("github", "repo_name"): STRING,
    ("github", "branch_name"): STRING, ("github", "tooling_branch_name"): STRING,
    ("github_actions", "artifact_retention_days"): INTEGER,
    ("github_actions", "cancel_in_progress"): BOOLEAN,
    ("github_actions", "max_parallel"): INTEGER,
    ("github_actions", "self_hosted"): BOOLEAN,
    ("github_actions", "store_build_artifacts"): BOOLEAN,
    ("github_actions", "timeout_minutes"): INTEGER,
    ("github_actions", "upload_packages"): BOOLEAN,
    ("github_actions", "triggers"): Shape("a list", lambda value: isinstance(value, list)),
}
# the free_disk_space setting of github_actions and azure: true/false or which parts to clean
FREE_DISK_PARTS = ("apt", "cache", "docker")
FREE_DISK_SPACE = Shape(f"true, false or a list of {', '.join(FREE_DISK_PARTS)}",
                        lambda value: _is_bool(value) or (isinstance(value, list) and
                                                          all(item in FREE_DISK_PARTS for item in value)))
OS_VERSION = _one_of("cos7", "alma8", "alma9", "ubi8")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(where: str, value: object, shape: Shape) -> None:
    if value is not None and not shape.accepts(value):
        raise FeedstockError(f"conda-forge.yml: {where} must be {shape.says} (conda-smithy's "
                             f"schema), not {_shown(value)}; fix it")


def check_shapes(config: Mapping[object, object]) -> None:
    """One line for the first setting whose value conda-smithy's schema would refuse."""
    for key, shape in TOP_LEVEL.items():
        _check(key, config.get(key), shape)
    for (section, key), shape in NESTED.items():
        values = config.get(section)
        if isinstance(values, dict):
            _check(f"{section}.{key}", values.get(key), shape)
    for section in ("github_actions", "azure"):
        values = config.get(section)
        if isinstance(values, dict):
            _check(f"{section}.free_disk_space", values.get("free_disk_space"), FREE_DISK_SPACE)
    for platform, tag in (config.get("os_version") or {}).items():
        _check(f"os_version.{platform}", tag, OS_VERSION)
