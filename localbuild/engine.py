"""The container engine (docker or podman): which executable, and the commands given to it."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import EXIT_PREFLIGHT, EXIT_USAGE, LocalBuildError
from .tokens import without_secrets

# Paths inside the container, as conda-forge's images and scripts expect them.
CONTAINER_FEEDSTOCK = "/home/conda/feedstock_root"
CONTAINER_RECIPE = "/home/conda/recipe_root"
CONTAINER_COMPILE_CACHE = "/home/conda/compile-cache"
CONTAINER_SOURCE_TARBALL = "/home/conda/source_tarball"   # --source-tarball, read-only
# Every container we start carries this label; `prune` keeps labelled (= kept, failed) ones.
LABEL = "org.pytorch-feedstock.build-locally"
# ... and this one, whose value is the build_artifacts/ it writes to: a later run finds a
# container that a killed run left running there (localbuild/left_containers.py)
ARTIFACTS_LABEL = f"{LABEL}.artifacts"


@dataclass(frozen=True)
class Engine:
    executable: str          # as configured: "docker", "podman" or a path

    @property
    def kind(self) -> str:
        """'podman' or 'docker' (anything docker-compatible)."""
        return "podman" if "podman" in Path(self.executable).name else "docker"

    def which(self) -> str | None:
        return shutil.which(self.executable)


def client_environment() -> dict[str, str]:
    """The environment of engine client commands (info, rm, prune): ours, without secrets."""
    return without_secrets(dict(os.environ))


def resolve_engine(cli_value: str | None, environ: dict[str, str]) -> Engine:
    """--engine wins over DOCKER_EXECUTABLE, which wins over `docker`; a machine with podman
    and no docker (Fedora, RHEL and many HPC sites) gets podman without being told."""
    value = cli_value or environ.get("DOCKER_EXECUTABLE")
    if not value:
        path = environ.get("PATH")
        found_podman = shutil.which("podman", path=path) and not shutil.which("docker", path=path)
        value = "podman" if found_podman else "docker"
    return Engine(value)


def require_client(engine: Engine) -> str:
    path = engine.which()
    if path is None:
        other = "podman" if engine.kind == "docker" else "docker"
        raise LocalBuildError(
            f"container engine client '{engine.executable}' not found on PATH; install it, pick "
            f"another with --engine {other} (or DOCKER_EXECUTABLE), build on this host with "
            "--native, or see the plan with --dry-run", EXIT_PREFLIGHT)
    return path


def unreachable_reason(engine: Engine, timeout: float = 30.0) -> str | None:
    """Why `<engine> info` fails (the daemon/service does not answer), or None if it answers."""
    try:
        proc = subprocess.run([engine.executable, "info"], stdin=subprocess.DEVNULL,
                              env=client_environment(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=timeout, text=True, errors="replace")
        return _first_line(proc.stderr) if proc.returncode != 0 else None
    except subprocess.TimeoutExpired:
        return f"'{engine.executable} info' did not answer within {timeout:.0f}s"
    except OSError as exc:
        return str(exc)


def how_to_start(engine: Engine) -> str:
    return ("start the Docker daemon (sudo systemctl start docker, or open Docker Desktop)"
            if engine.kind == "docker" else "start the podman service (podman machine start)")


def require_running(engine: Engine, timeout: float = 30.0) -> None:
    """`<engine> info` must succeed: the daemon/service is reachable."""
    reason = unreachable_reason(engine, timeout)
    if reason is None:
        return
    raise LocalBuildError(
        f"{engine.kind} engine not reachable ({reason}); {how_to_start(engine)}, or use "
        "--engine podman, --native (conda-build on this host), or --dry-run to see the plan "
        "without building", EXIT_PREFLIGHT)


def missing_image(engine: Engine, image: str) -> str | None:
    """None when the image is here, or a pull brings it (the pull's progress shows); else why not."""
    if _quiet([engine.executable, "image", "inspect", image], timeout=120):
        return None
    try:
        proc = subprocess.run([engine.executable, "pull", image], stdin=subprocess.DEVNULL,
                              env=client_environment(), stderr=subprocess.PIPE, text=True,
                              errors="replace")
        return _last_line(proc.stderr) if proc.returncode != 0 else None
    except OSError as exc:
        return str(exc)


def require_images(engine: Engine, images: dict[str, str], tool: str | None) -> None:
    """Every image (image -> a config that uses it) is here or pulled; else one line naming all
    that are missing, with the commands that work for this engine and this tool."""
    missing = {image: (config, reason) for image, config in images.items()
               if (reason := missing_image(engine, image)) is not None}
    if not missing:
        return
    exe = engine.executable
    names = ", ".join(missing)
    reason = next(iter(missing.values()))[1]
    engine_flag = "" if engine.kind == "podman" and Path(exe).name == "podman" else f" --engine {shlex.quote(exe)}"
    stand_ins = "; ".join(f"python3 devtools/stand_in_image.py {config}{engine_flag}"
                          for config, _ in missing.values())
    # the stand-in has rattler-build's Python, not conda: conda-build cannot run in it
    then = "" if tool == "rattler-build" else ", then build with --tool rattler-build (the stand-in has no conda)"
    raise LocalBuildError(
        f"{'image' if len(missing) == 1 else f'{len(missing)} images'} {names} "
        f"{'is' if len(missing) == 1 else 'are'} not on this machine and cannot be pulled ({reason}); "
        f"pull {'it' if len(missing) == 1 else 'them'} where a registry is reachable ({exe} pull IMAGE, or "
        f"{exe} load a saved copy), or build a stand-in offline: {stand_ins}{then}",
        EXIT_PREFLIGHT)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no error message"


def _first_line(text: str) -> str:
    for line in (text or "").splitlines():
        line = line.strip()
        if line and not line.lower().startswith("server:"):
            return line[:200]
    return "no error message"


def mount_argument(host: Path, target: str, read_only: bool = False) -> str:
    """A bind mount (read-write unless asked) with the shared SELinux label (``z``): works
    with SELinux enforcing and is ignored where SELinux is off."""
    text = str(host)
    if ":" in text or "," in text:
        raise LocalBuildError(f"cannot mount {text}: the path contains ':' or ','; move the "
                              "feedstock (or --compile-cache folder) to a plain path", EXIT_USAGE)
    return f"{text}:{target}:{'ro' if read_only else 'rw'},z"


# AMD GPUs: the compute interface and the render nodes; their groups on most distributions
AMD_DEVICES = ("kfd", "dri")
AMD_GROUP_NAMES = ("video", "render")


def amd_device_groups(dev: Path = Path("/dev")) -> list[str]:
    """The host's group ids that own /dev/kfd and the /dev/dri nodes (video, render), which
    the build user in the container must have to open them; the usual group names when this
    host has no such devices (then only the dry-run plan uses them)."""
    nodes = [dev / "kfd", *sorted((dev / "dri").glob("*"))] if (dev / "kfd").exists() else []
    gids = sorted({str(node.stat().st_gid) for node in nodes if node.exists()}, key=int)
    return gids or list(AMD_GROUP_NAMES)


def gpu_arguments(engine: Engine, backend: str, dev: Path = Path("/dev")) -> list[str]:
    if backend == "cuda":
        return ["--device", "nvidia.com/gpu=all"] if engine.kind == "podman" else ["--gpus", "all"]
    if backend == "rocm":
        devices = [arg for name in AMD_DEVICES for arg in ("--device", str(dev / name))]
        if engine.kind == "podman":
            # rootless Podman cannot add host groups; keep-groups hands the user's own
            # supplementary groups (video/render, which give them the devices) to the container
            return devices + ["--group-add", "keep-groups"]
        # numeric ids: the image's /etc/group may lack "render" or number it differently
        return devices + [arg for gid in amd_device_groups(dev) for arg in ("--group-add", gid)]
    return []


def extra_run_arguments(environ: dict[str, str]) -> list[str]:
    """CONDA_FORGE_DOCKER_RUN_ARGS, split like a shell would."""
    value = environ.get("CONDA_FORGE_DOCKER_RUN_ARGS", "")
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise LocalBuildError(f"CONDA_FORGE_DOCKER_RUN_ARGS cannot be split ({exc}): {value!r}",
                              EXIT_USAGE) from None


def container_name(config: str, stamp: str) -> str:
    """Lower-case (so `commit` can reuse it as an image name) and within Docker's charset."""
    safe = "".join(ch if ch.isalnum() or ch in "_.-" else "-" for ch in config.lower())
    return f"build-locally-{safe[:100]}-{stamp}"


def enter_command(engine: Engine, name: str, mounts: list[str], image_tag: str) -> str:
    """How to get a shell in the state a failed container ended in."""
    mount_args = " ".join(f"-v {shlex.quote(m)}" for m in mounts)
    exe = shlex.quote(engine.executable)
    return (f"{exe} commit {name} {image_tag} && "
            f"{exe} run -it --rm {mount_args} {image_tag} bash")


def remove_command(engine: Engine, name: str, force: bool = False) -> list[str]:
    """`rm` of a container; forced, at once: podman would first wait its stop timeout (10 s)
    for the build to end by itself, where docker kills."""
    if not force:
        return [engine.executable, "rm", name]
    return [engine.executable, "rm", "-f", *(["--time", "0"] if engine.kind == "podman" else []), name]


def remove_container(engine: Engine, name: str, force: bool = False) -> bool:
    return _quiet(remove_command(engine, name, force), timeout=120)


def prune_command(engine: Engine) -> list[str]:
    # label!= keeps the containers of failed builds that we kept on purpose
    return [engine.executable, "system", "prune", "--force", "--filter", f"label!={LABEL}"]


def _quiet(command: list[str], timeout: float) -> bool:
    try:
        return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=client_environment(),
                              timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False

