"""A container of the docker or podman engine (localbuild/engine.py), the config's image: the
feedstock and recipe mounted where conda-forge's images expect them."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

from .. import engine as engines
from ..errors import EXIT_USAGE, LocalBuildError
from .mounts import container_mounts, container_script

if TYPE_CHECKING:
    from ..engine import Engine
    from ..build_plan import BuildPlan
    from ..options import Options


class ContainerLocation:
    name = "container"
    in_container = True
    first_stop_signal = signal.SIGTERM   # the engine client passes it on; the container is removed too

    def inside_root(self, options: "Options") -> str:
        return engines.CONTAINER_FEEDSTOCK

    def recipe_root(self, options: "Options") -> str:
        return engines.CONTAINER_RECIPE

    def describe(self, options: "Options") -> str:
        return f"container ({options.request.engine.kind})"

    def finish_plan(self, plan: "BuildPlan", options: "Options", env: dict[str, str], recipe_root: str) -> None:
        config = plan.config
        image = config.docker_image
        if not image:
            raise LocalBuildError(f"{config.path.name} has no docker_image; regenerate it with "
                                  "`python -m feedstock rerender`", EXIT_USAGE)
        eng = options.request.engine
        plan.image = image
        plan.container = engines.container_name(config.name, options.stamp)
        plan.mounts = [engines.mount_argument(host, inside, read_only=ro)
                       for host, inside, ro in container_mounts(options, plan)]
        command = [eng.executable, "run", "--name", plan.container,
                   "--label", f"{engines.LABEL}={config.name}",
                   "--label", f"{engines.ARTIFACTS_LABEL}={options.artifacts}"]
        if plan.interactive:
            command.append("-it" if options.stdin_is_tty else "-i")
        for mount in plan.mounts:
            command += ["-v", mount]
        if options.request.gpu_tests:
            command += engines.gpu_arguments(eng, config.gpu[0])
        for key, value in env.items():
            command += ["-e", f"{key}={value}"]
        for key in plan.passed_by_name:
            command += ["-e", key]
        command += list(options.extra_run_args)
        plan.command = command + [image, *container_script()]

    def check(self, plans: list["BuildPlan"], engine: "Engine", feedstock_root: Path, tool: str | None,
              environ: dict[str, str]) -> None:
        engines.require_client(engine)
        engines.require_running(engine)
        images: dict[str, str] = {}
        for plan in plans:
            if plan.image:
                images.setdefault(plan.image, plan.name)
        engines.require_images(engine, images, tool)

    def process_environment(self, plan: "BuildPlan", environ: dict[str, str], env: dict[str, str]) -> None:
        """Nothing more: the container gets its variables with -e on the command line."""
