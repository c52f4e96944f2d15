"""Real containers for the tests: podman with this machine's private configuration
(devtools/podman_config.py), the stand-in build image (devtools/stand_in_image.py) and a feedstock
tree whose recipe builds the PyTorch-shaped test project.

`podman_unavailable()` says why the machine cannot run them (the tests skip with that), `Podman`
runs engine commands with the private configuration, `podman_feedstock` writes the tree.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.container_host import rootful_tools_missing
from tests.support.paths import REPO_ROOT

TOOLS = ("podman", "runc", "mmdebstrap")
CPU = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
PYTHON = "3.12"  # one Python: also the recipe's split_python, so the image needs one install
FAILING, FAILING_TOO, INTERRUPTED, NO_IMAGE = ("linux_64_failing", "linux_64_failing_too",
                                               "linux_64_interrupted", "linux_64_no_image")
# what the feedstock tree for a real build-locally run holds (the rest of the repository is
# not read by build-locally or build_steps.sh; devtools/stand_in_image.py reads feedstock/'s
# rootfs module, stdlib only)
TREE = ("build-locally.py", "localbuild", "common", "devtools", "feedstock", "requirements-dev.txt")


def podman_unavailable() -> str | None:
    return rootful_tools_missing(TOOLS, "apt-get install podman runc mmdebstrap",
                                 "the real container tests run rootful podman (CI runs as root)")


@dataclass
class Podman:
    env: dict[str, str]   # CONTAINERS_CONF / CONTAINERS_STORAGE_CONF with the rest of ours

    def run(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {proc.stderr.strip()[-500:]}")
        return proc

    def containers(self, label: str) -> list[str]:
        out = self.run("ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}").stdout
        return sorted(out.split())

    def remove_own(self) -> None:
        """Give the disk back: the containers and images of this store only. Never `podman
        system reset`: it also deletes podman's shared temporary folder (/run/libpod), which
        every other store on the machine uses, so a container running for another worker or
        user loses its exit code, and it removes every podman network on the machine."""
        self.run("rm", "--all", "--force", check=False, timeout=600)
        self.run("rmi", "--all", "--force", check=False, timeout=600)


def private_podman(folder: Path) -> Podman:
    """podman configured by devtools/podman_config.py, its image store under folder. A test's
    folder is too long a path for podman's run folder, which then goes under /tmp: it is removed
    when this process exits (the store itself goes with the test's folder)."""
    sys.path.insert(0, str(REPO_ROOT / "devtools"))
    try:
        from podman_config import runroot, write_config
    finally:
        sys.path.pop(0)
    env = dict(os.environ)
    env.update(write_config(folder))
    run = runroot(folder.expanduser().resolve())
    if folder.resolve() not in run.parents:
        atexit.register(shutil.rmtree, run, ignore_errors=True)
    return Podman(env)


def build_stand_in_image(engine: Podman, root: Path, config: str, pythons: list[Path],
                         engine_name: str = "podman") -> str:
    """devtools/stand_in_image.py in the tree (its rootfs tar cached outside the repository),
    imported into `engine` (a Podman, or a DockerDaemon with engine_name "docker")."""
    args = [sys.executable, str(root / "devtools" / "stand_in_image.py"), config,
            "--engine", engine_name]
    for python in pythons:
        args += ["--host-python", str(python)]
    proc = subprocess.run(args, env=engine.env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise AssertionError(f"stand_in_image.py failed: {proc.stdout[-500:]}{proc.stderr[-1000:]}")
    return proc.stdout


def podman_feedstock(root: Path, recipe_source: Path, configs: dict[str, str]) -> Path:
    """build-locally.py, localbuild/, devtools/, recipe/ (its source: the test project, copied
    into recipe/ so that one relative path is right on the host and in the container) and
    .ci_support/ with the given {name: text} configs."""
    from tests.realbuild.feedstock_build import override_source

    root.mkdir(parents=True)
    for name in TREE:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / name)
    shutil.copytree(REPO_ROOT / "recipe", root / "recipe",
                    ignore=shutil.ignore_patterns("__pycache__", "output"))
    shutil.copytree(recipe_source, root / "recipe" / "test_project")
    recipe = root / "recipe" / "recipe.yaml"
    recipe.write_text(override_source(recipe.read_text(), Path("test_project")))
    (root / ".ci_support").mkdir()
    for name, text in configs.items():
        (root / ".ci_support" / f"{name}.yaml").write_text(text)
    return root


def config_texts(versions: dict[str, str], work: Path) -> dict[str, str]:
    """The cpu job with this machine's values and one Python, its channel_sources as
    conda-forge wrote them; copies that fail early, run long, or name an image nobody has."""
    import yaml

    from tests.realbuild.session import machine_variant

    path = machine_variant(CPU, (PYTHON,), versions, work / "variant.yaml")
    data = yaml.safe_load(path.read_text())
    data["channel_sources"] = ["conda-forge"]
    data.pop("is_python_min", None)  # zipped with python: one Python, one value
    data["zip_keys"] = [keys for keys in data.get("zip_keys", []) if "is_python_min" not in keys]
    text = yaml.safe_dump(data, sort_keys=True)
    failing = text.replace(f"{PYTHON}.* *_cpython", "3.99.* *_cpython")  # nothing to solve
    if failing == text:
        raise ValueError(f"the {CPU} variant names no Python {PYTHON}")
    no_image = text.replace(data["docker_image"][0], "localhost/feedstock-not-here:1")
    return {CPU: text, FAILING: failing, FAILING_TOO: failing, INTERRUPTED: text,
            NO_IMAGE: no_image}
