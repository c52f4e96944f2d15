"""Where build-locally.py runs a build: the *build location* (docs/glossary.md). One module each,
behind one small interface (`BuildLocation`):

- `container`: a container of the docker or podman engine, the config's image;
- `apptainer`: an Apptainer (or Singularity) container of that image, as HPC sites run them;
- `native`: this machine, its own conda-build or rattler-build.

Each location says where the build sees the feedstock and its recipe, writes the command that
runs localbuild/in_container/build_steps.sh there, checks this machine before anything is
written, hands the started process its environment, and says how a build there is asked to stop.
`choose` picks the location of a config on this machine, or says why none can build it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .apptainer import ApptainerLocation, is_apptainer
from .container import ContainerLocation
from .native import NativeLocation

if TYPE_CHECKING:
    from ..engine import Engine
    from ..configs import CiConfig
    from ..build_plan import BuildPlan
    from ..options import Options


class BuildLocation(Protocol):
    name: str
    in_container: bool
    first_stop_signal: int   # what a build there gets first when it must stop (then SIGTERM, SIGKILL)

    def inside_root(self, options: "Options") -> str:
        """The feedstock's path as the build sees it."""
        ...

    def recipe_root(self, options: "Options") -> str:
        """The recipe folder's path as the build sees it."""
        ...

    def finish_plan(self, plan: "BuildPlan", options: "Options", env: dict[str, str], recipe_root: str) -> None:
        """plan.command (and the mounts, image and container name where there are any);
        recipe_root: the recipe folder the build reads (a derived copy with --source-tarball)."""
        ...

    def check(self, plans: list["BuildPlan"], engine: "Engine", feedstock_root: Path, tool: str | None,
              environ: dict[str, str]) -> None:
        """This machine can build there: one LocalBuildError line (exit 3) where it cannot."""
        ...

    def process_environment(self, plan: "BuildPlan", environ: dict[str, str], env: dict[str, str]) -> None:
        """What the started process gets besides ours without secrets (`env`, changed in place)."""
        ...

    def describe(self, options: "Options") -> str:
        """The location as the dry run and the progress lines name it."""
        ...


LOCATIONS: dict[str, BuildLocation] = {
    location.name: location for location in (ContainerLocation(), ApptainerLocation(), NativeLocation())}


def location_of(plan: "BuildPlan") -> BuildLocation:
    return LOCATIONS[plan.location]


def choose(config: "CiConfig", options: "Options") -> tuple[str, str | None]:
    """(the location's name, None), or ('', why this machine cannot build the config)."""
    platform = config.platform
    host = options.host
    if options.request.native:
        if platform != host:
            return "", f"needs a {platform} host: a native build runs on the host (this is {host})"
        return "native", None
    if platform.startswith("linux-"):
        build = config.build_platform
        if _arch(build) != _arch(host) and not options.request.emulate:
            return "", (f"needs a {build} host: its image runs {build} code (this is {host}); "
                        "--emulate runs it under emulation (qemu/Rosetta, very slow)")
        return ("apptainer" if is_apptainer(options.request.engine.executable) else "container"), None
    if platform.startswith("osx-"):
        if host.startswith("osx-"):
            return "native", None
        return "", f"needs macOS: {platform} configs build natively on a Mac with conda-build"
    return "", f"{platform} config: not supported by build-locally"


def _arch(platform: str) -> str:
    """linux-aarch64 / osx-arm64 -> 'arm64-family'; linux-64 / osx-64 -> '64'."""
    arch = platform.split("-", 1)[-1]
    return "aarch64" if arch in ("aarch64", "arm64") else arch
