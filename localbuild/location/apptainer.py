"""--engine apptainer (or singularity): the config's image through `apptainer exec`, as HPC sites
without Docker run containers. The feedstock is bound where the Docker build mounts it, so
localbuild/in_container/build_steps.sh runs unchanged.

The image is `docker://<the config's docker_image>` (Apptainer converts and caches it), or a
local SIF given with --apptainer-image. The container starts with a clean environment
(--cleanenv) and without the host's home; the build's variables go in with --env, and secrets
by name only: their values travel in the process environment as APPTAINERENV_<NAME>, which
Apptainer hands to the container, never on the command line. --writable-tmpfs lets the
in-container conda install its build tool over the read-only image.
"""
from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from .. import engine as engines
from ..errors import EXIT_PREFLIGHT, EXIT_USAGE, LocalBuildError
from .mounts import container_mounts, container_script

if TYPE_CHECKING:
    from ..engine import Engine
    from ..build_plan import BuildPlan
    from ..options import Options

NAMES = ("apptainer", "singularity")
ENV_PREFIX = "APPTAINERENV_"


def is_apptainer(executable: str) -> bool:
    return Path(executable).name in NAMES


def image_reference(docker_image: str, sif: str | None) -> str:
    return sif if sif else f"docker://{docker_image}"


def bind_argument(host: Path, target: str, read_only: bool = False) -> str:
    text = str(host)
    if ":" in text or "," in text:
        raise LocalBuildError(f"cannot bind {text}: the path contains ':' or ','; move the "
                              "feedstock (or --compile-cache folder) to a plain path", EXIT_USAGE)
    return f"{text}:{target}:{'ro' if read_only else 'rw'}"


def gpu_arguments(backend: str) -> list[str]:
    """--nv binds the host's NVIDIA driver libraries and devices; --rocm AMD's."""
    return {"cuda": ["--nv"], "rocm": ["--rocm"]}.get(backend, [])


def exec_command(executable: str, image: str, binds: list[str], env: dict[str, str],
                 gpu: list[str], workdir: str, script: list[str]) -> list[str]:
    command = [executable, "exec", "--cleanenv", "--no-home", "--writable-tmpfs",
               "--pwd", workdir]
    for bind in binds:
        command += ["--bind", bind]
    for key, value in env.items():
        command += ["--env", f"{key}={value}"]
    return command + gpu + [image, *script]


def secrets_by_name(names: list[str], environ: dict[str, str]) -> dict[str, str]:
    """APPTAINERENV_<NAME> for each secret passed by name (values stay off the command line)."""
    return {f"{ENV_PREFIX}{name}": environ[name] for name in names if name in environ}


def require_apptainer(executable: str) -> str:
    found = shutil.which(executable)
    if found is None:
        raise LocalBuildError(f"--engine {executable}: '{executable}' not found on PATH; load it "
                              f"(e.g. `module load {Path(executable).name}`), or build with "
                              "--native, or see the plan with --dry-run", EXIT_PREFLIGHT)
    return found


class ApptainerLocation:
    name = "apptainer"
    in_container = True
    first_stop_signal = signal.SIGTERM

    def inside_root(self, options: "Options") -> str:
        return engines.CONTAINER_FEEDSTOCK

    def recipe_root(self, options: "Options") -> str:
        return engines.CONTAINER_RECIPE

    def describe(self, options: "Options") -> str:
        return "apptainer"

    def finish_plan(self, plan: "BuildPlan", options: "Options", env: dict[str, str], recipe_root: str) -> None:
        config = plan.config
        if not config.docker_image and not options.request.apptainer_image:
            raise LocalBuildError(f"{config.path.name} has no docker_image; regenerate it with "
                                  "`python -m feedstock rerender`, or give --apptainer-image SIF",
                                  EXIT_USAGE)
        plan.image = image_reference(config.docker_image, options.request.apptainer_image)
        plan.mounts = [bind_argument(host, inside, ro) for host, inside, ro in container_mounts(options, plan)]
        gpu = gpu_arguments(config.gpu[0]) if options.request.gpu_tests else []
        plan.command = exec_command(options.request.engine.executable, plan.image, plan.mounts, env, gpu,
                                    engines.CONTAINER_FEEDSTOCK, container_script())

    def check(self, plans: list["BuildPlan"], engine: "Engine", feedstock_root: Path, tool: str | None,
              environ: dict[str, str]) -> None:
        require_apptainer(engine.executable)

    def process_environment(self, plan: "BuildPlan", environ: dict[str, str], env: dict[str, str]) -> None:
        # the container starts clean (--cleanenv): secrets reach it by name through these
        env.update(secrets_by_name(plan.passed_by_name, environ))
