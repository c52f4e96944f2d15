"""The folders a container build gets, Docker/podman or Apptainer alike, and the script it runs."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .. import engine as engines
from ..channels import local_folders

if TYPE_CHECKING:
    from ..build_plan import BuildPlan
    from ..options import Options

BUILD_SCRIPT = "localbuild/in_container/build_steps.sh"


def container_mounts(options: "Options", plan: "BuildPlan") -> list[tuple[Path, str, bool]]:
    """(host path, path inside, read-only) of a container build."""
    root = options.feedstock_root
    mounts = [(root, engines.CONTAINER_FEEDSTOCK, False),
              (root / "recipe", engines.CONTAINER_RECIPE, False)]
    if options.request.compile_cache_dir is not None:
        mounts.append((options.request.compile_cache_dir, engines.CONTAINER_COMPILE_CACHE, False))
    for folder in local_folders(options.request.channels):  # at the same path: one path on both sides
        mounts.append((folder, str(folder), True))
    if options.request.source_tarball is not None and plan.source_path is not None:
        mounts.append((options.request.source_tarball, plan.source_path, True))
    if plan.develop_folder is not None and options.request.develop is not None:
        # at the host's paths: CMake, the environment's prefix and the messages name one path
        mounts += [(options.request.develop, str(options.request.develop), False),
                   (plan.develop_folder, str(plan.develop_folder), False)]
    return mounts


def container_script() -> list[str]:
    """build_steps.sh, as a container sees it."""
    return ["bash", f"{engines.CONTAINER_FEEDSTOCK}/{BUILD_SCRIPT}"]
