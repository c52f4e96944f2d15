"""Where things are in a feedstock and which platforms it targets (from conda-forge.yml)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .errors import FeedstockError
from .forge_config_schema import check_shapes
from .text_input import read_yaml
from .platforms import KNOWN_SUBDIRS, Platform
from common.path_kinds import folder_problem
from common.suggest import did_you_mean as suggestion

# conda-smithy renders these unless conda-forge.yml says otherwise; others need a provider entry
DEFAULT_PLATFORMS = ("linux_64", "osx_64", "win_64")
# where the feedstock's own pinning file may live (first found wins) unless conda-forge.yml names it
PINNING_CANDIDATES = ("pinning.yaml", "conda_build_config.yaml", ".ci_support/pinning.yaml",
                      "recipe/pinning.yaml", "recipe/conda_forge_pinning.yaml")
# every platform name conda-smithy accepts as a key of provider: (linux_64, ...); the bare
# os names are its aliases for all platforms of that os, which we do not expand
PLATFORM_NAMES = tuple(subdir.replace("-", "_") for subdir in KNOWN_SUBDIRS)
PROVIDER_ALIASES = ("linux", "osx", "win")
# conda-forge.yml's top-level keys: those conda-smithy's schema (ConfigModel, which allows no
# others) knows. A misspelt one would be ignored and quietly change the workflow.
FORGE_CONFIG_KEYS = (
    "appveyor", "azure", "bot", "build_platform", "build_with_mambabuild", "channel_priority",
    "choco", "circle", "clone_depth", "compiler_stack", "conda_build", "conda_build_tool",
    "conda_forge_output_validation", "conda_install_tool", "conda_solver", "config_version",
    "docker", "drone", "exclusive_config_file", "github", "github_actions",
    "idle_timeout_minutes", "linter", "matrix", "max_py_ver", "max_r_ver", "min_py_ver",
    "min_r_ver", "noarch_platforms", "os_version", "package", "private_upload", "provider",
    "recipe_dir", "remote_ci_setup", "secrets", "shellcheck", "skip_render", "templates", "test",
    "test_on_native_only", "travis", "upload_on_branch", "woodpecker", "workflow_settings",
)
# provider values conda-smithy's schema accepts (its CIservices and DeprecatedCIservices enums,
# conda_smithy/schema.py), besides false/null, a boolean, or a list of these
CI_SERVICES = ("azure", "github_actions", "default", "emulated", "native", "None")
DEPRECATED_CI_SERVICES = ("circle", "travis", "appveyor", "drone", "woodpecker")


def did_you_mean(wrong: str, known: Iterable[str], listed: str | None = None) -> str:
    """'did you mean X?' with the closest known name (then `listed`, if given), else `listed`
    or every known name."""
    known = list(known)
    phrase = suggestion(wrong, known)
    if phrase is None:
        return listed or f"known: {', '.join(known)}"
    return phrase + (f" ({listed})" if listed else "")


def provider_enabled(platform: str, value: object) -> bool:
    """Whether a provider: value turns the platform on; an unknown CI service is an error.

    False, null, None and an empty list turn it off; a list is on when any entry is."""
    services = value if isinstance(value, list) else [value]
    known = CI_SERVICES + DEPRECATED_CI_SERVICES
    for service in services:
        if service is not None and not isinstance(service, bool) and str(service) not in known:
            listed = (f"conda-smithy knows {', '.join(CI_SERVICES)} and the deprecated "
                      f"{', '.join(DEPRECATED_CI_SERVICES)}; false or null turns a platform off")
            raise FeedstockError(f"conda-forge.yml: provider.{platform}: unknown CI service "
                                 f"'{service}'; {did_you_mean(str(service), known, listed)}")
    return any(service not in (None, False, "None") for service in services)


def escapes(root: Path, base: Path, listed: str) -> str | None:
    """Why `listed` (a path a recipe names, relative to `base`) leaves the feedstock at `root`,
    or None: an absolute path, `..` above the root, or a symlink resolving outside it. A
    hostile pull request must not make the tools read /etc/passwd."""
    if Path(listed).is_absolute():
        return f"{listed} is an absolute path"
    try:
        target = (base / listed).resolve()
    except (OSError, RuntimeError):   # a symlink loop: the read that follows names it
        return None
    if not target.is_relative_to(root.resolve()):
        return f"{listed} resolves to {target}, outside the feedstock"
    return None


@dataclass(frozen=True)
class Feedstock:
    root: Path
    forge_config: dict

    @property
    def recipe_dir(self) -> Path:
        return self.root / str(self.forge_config.get("recipe_dir", "recipe"))

    @property
    def meta_yaml(self) -> Path:
        return self.recipe_dir / "meta.yaml"

    @property
    def recipe_config(self) -> Path:
        return self.recipe_dir / "conda_build_config.yaml"

    @property
    def ci_support(self) -> Path:
        return self.root / ".ci_support"

    @property
    def pinning_file(self) -> Path | None:
        """The exclusive pinning file: conda-forge.yml's ``exclusive_config_file`` or a known name."""
        named = self.forge_config.get("exclusive_config_file")
        if named:
            path = self.root / str(named)
            if not path.is_file():
                raise FeedstockError(f"conda-forge.yml names exclusive_config_file {named}, which does not exist")
            return path
        for candidate in PINNING_CANDIDATES:
            path = self.root / candidate
            # a folder or a broken link under the name is the pinning file, refused when read,
            # never "no pinning file" (which renders a matrix without the pins)
            if os.path.lexists(path):
                return path
        return None

    def variant_config_files(self) -> list[Path]:
        """The files conda-smithy reads, lowest priority first: pinning, then the recipe's."""
        files = [p for p in (self.pinning_file,) if p]
        if os.path.lexists(self.recipe_config):
            files.append(self.recipe_config)
        return files

    def platforms(self) -> list[Platform]:
        """Target platforms in conda-smithy's sense: defaults plus every one given a provider."""
        providers = self.forge_config.get("provider") or {}
        names = [name for name in DEFAULT_PLATFORMS
                 if provider_enabled(name, providers.get(name, "default"))]
        for name, provider in providers.items():
            if str(name) not in PROVIDER_ALIASES and provider_enabled(str(name), provider) \
                    and name not in names:
                names.append(name)
        return [_known_platform(str(name), "provider") for name in names]

    def why_targeted(self, platform: Platform) -> str | None:
        """Why a platform conda-forge.yml never names is built (conda-smithy's defaults), or
        None when conda-forge.yml gives it a provider."""
        if platform.name in (self.forge_config.get("provider") or {}):
            return None
        missing = "" if self.forge_config else " (here conda-forge.yml is missing or empty)"
        return (f"but {platform.subdir} is built only because conda-smithy builds "
                f"{', '.join(DEFAULT_PLATFORMS)} unless conda-forge.yml turns them off{missing}: "
                f"to skip it, add `provider: {platform.name}: None` to conda-forge.yml")

    def build_platform(self, platform: Platform) -> Platform:
        mapping = self.forge_config.get("build_platform") or {}
        return _known_platform(str(mapping.get(platform.name, platform.name)), "build_platform")


def _known_platform(name: str, section: str) -> Platform:
    platform = Platform.from_name(name)
    if not platform.is_known:
        raise FeedstockError(f"conda-forge.yml: {section} names unknown platform '{name}'; "
                             f"{did_you_mean(name, PLATFORM_NAMES)}")
    return platform


def load_feedstock(root: Path) -> Feedstock:
    """Read ``root``/conda-forge.yml (may be absent or empty) and check the recipe is there."""
    root = Path(root).resolve()
    if not os.path.lexists(root / "recipe" / "meta.yaml") and not os.path.lexists(root / "conda-forge.yml"):
        raise FeedstockError(f"{root} is not a feedstock (no recipe/meta.yaml); run from the feedstock root "
                             "or pass --feedstock-root")
    forge_yml = root / "conda-forge.yml"
    config: dict = {}
    try:
        config = read_yaml(forge_yml, "conda-forge.yml") or {}
    except FileNotFoundError:
        pass
    if not isinstance(config, dict):
        raise FeedstockError("conda-forge.yml must be a mapping of settings (e.g. provider: {linux_64: ...}); fix it")
    for key in config:
        if str(key) not in FORGE_CONFIG_KEYS:
            raise FeedstockError(f"conda-forge.yml: unknown top-level key '{key}' (conda-smithy's "
                                 f"schema allows no others); {did_you_mean(str(key), FORGE_CONFIG_KEYS)}")
    check_shapes(config)
    for section in ("provider", "build_platform"):
        if not isinstance(config.get(section) or {}, dict):
            raise FeedstockError(f"conda-forge.yml: {section} must be a mapping of platform names; fix it")
    # every key and value, not only the enabled ones: a typo must not switch a platform off
    for name, value in (config.get("provider") or {}).items():
        if str(name) not in PROVIDER_ALIASES:
            _known_platform(str(name), "provider")
        provider_enabled(str(name), value)
    feedstock = Feedstock(root=root, forge_config=config)
    if not os.path.lexists(feedstock.meta_yaml):
        raise FeedstockError(f"{feedstock.meta_yaml} not found; the recipe must live in recipe/")
    for folder in (feedstock.root / "recipe", feedstock.ci_support):
        problem = folder_problem(folder, may_be_missing=True)
        if problem:   # a file or a symlink loop where the folder belongs: one line, not EEXIST later
            raise FeedstockError(f"{folder.relative_to(feedstock.root)} {problem}; fix or remove it")
    return feedstock
