"""Where things are in a feedstock and which platforms it targets (from conda-forge.yml)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import FeedstockError
from .platforms import Platform

# conda-smithy renders these unless conda-forge.yml says otherwise; others need a provider entry
DEFAULT_PLATFORMS = ("linux_64", "osx_64", "win_64")
# where the feedstock's own pinning file may live (first found wins) unless conda-forge.yml names it
PINNING_CANDIDATES = ("pinning.yaml", "conda_build_config.yaml", ".ci_support/pinning.yaml",
                      "recipe/pinning.yaml", "recipe/conda_forge_pinning.yaml")


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
            if path.is_file():
                return path
        return None

    def variant_config_files(self) -> list[Path]:
        """The files conda-smithy reads, lowest priority first: pinning, then the recipe's."""
        files = [p for p in (self.pinning_file,) if p]
        if self.recipe_config.is_file():
            files.append(self.recipe_config)
        return files

    def platforms(self) -> list[Platform]:
        """Target platforms in conda-smithy's sense: defaults plus every one given a provider."""
        providers = self.forge_config.get("provider") or {}

        def enabled(value: object) -> bool:
            # null, "None" and "" all switch a platform off
            return bool(value) and str(value).strip().lower() not in ("none", "null")

        names = [name for name in DEFAULT_PLATFORMS if enabled(providers.get(name, "default"))]
        for name, provider in providers.items():
            if enabled(provider) and "_" in str(name) and name not in names:
                names.append(name)
        return [_known_platform(str(name), "provider") for name in names]

    def build_platform(self, platform: Platform) -> Platform:
        mapping = self.forge_config.get("build_platform") or {}
        return _known_platform(str(mapping.get(platform.name, platform.name)), "build_platform")


def _known_platform(name: str, section: str) -> Platform:
    platform = Platform.from_name(name)
    if not platform.is_known:
        raise FeedstockError(f"conda-forge.yml: {section} names unknown platform '{name}'; "
                             "use names like linux_64, linux_aarch64, osx_arm64")
    return platform


def load_feedstock(root: Path) -> Feedstock:
    """Read ``root``/conda-forge.yml (may be absent or empty) and check the recipe is there."""
    root = Path(root).resolve()
    if not (root / "recipe" / "meta.yaml").is_file() and not (root / "conda-forge.yml").is_file():
        raise FeedstockError(f"{root} is not a feedstock (no recipe/meta.yaml); run from the feedstock root "
                             "or pass --feedstock-root")
    forge_yml = root / "conda-forge.yml"
    config: dict = {}
    if forge_yml.is_file():
        try:
            config = yaml.safe_load(forge_yml.read_text()) or {}
        except yaml.YAMLError as err:
            raise FeedstockError(f"conda-forge.yml is not valid YAML ({getattr(err, 'problem', err)}); fix it")
    if not isinstance(config, dict):
        raise FeedstockError("conda-forge.yml must be a mapping of settings (e.g. provider: {linux_64: ...}); fix it")
    for section in ("provider", "build_platform"):
        if not isinstance(config.get(section) or {}, dict):
            raise FeedstockError(f"conda-forge.yml: {section} must be a mapping of platform names; fix it")
    feedstock = Feedstock(root=root, forge_config=config)
    if not feedstock.meta_yaml.is_file():
        raise FeedstockError(f"{feedstock.meta_yaml} not found; the recipe must live in recipe/")
    return feedstock
