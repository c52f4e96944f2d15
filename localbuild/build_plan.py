"""One config's build plan, as data: where it builds, the command, the environment, the marker
and the log. localbuild/plan.py makes it; --dry-run prints it, the batch runner executes it."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .configs import CiConfig
from .source_tarball import RecipeSource

MARKER_PREFIX = "conda-forge-build-done-"


@dataclass
class BuildPlan:
    config: CiConfig
    location: str                      # where it builds: "container" | "apptainer" | "native" | "" (skipped)
    skip_reason: str | None            # why this machine does not build it (None: it does)
    marker: Path
    log: Path
    dev_tag: str | None = None
    image: str | None = None
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)          # passed with values
    passed_by_name: list[str] = field(default_factory=list)    # secrets: name only, value from env
    container: str | None = None
    mounts: list[str] = field(default_factory=list)
    derived_config: Path | None = None
    derived_text: str | None = None
    interactive: bool = False
    test_only: bool = False            # test packages already built; no build, no marker
    tool_command: list[str] = field(default_factory=list)     # rattler-build's own command line
    gpu_archs: str | None = None       # the arch list the build compiles for (None: CPU)
    tool: str = ""                     # conda-build | rattler-build ("" when skipped)
    source: RecipeSource | None = None  # with --source-tarball: the recipe's url and sha256
    source_path: str | None = None     # where the build reads the tarball (SOURCE_TARBALL)
    source_link: Path | None = None    # --native: a link named as the url's file, to the tarball
    derived_recipe: Path | None = None  # rattler-build: recipe/ copied with a file:// url
    derived_recipe_text: str | None = None  # that copy's recipe.yaml
    keep_python_indices: list[int] | None = None  # --python: the config's Pythons kept (None: all)
    develop_folder: Path | None = None  # --develop: build_artifacts/develop/<config>-<python>/

    @property
    def name(self) -> str:
        return self.config.name
