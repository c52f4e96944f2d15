"""Real containers for the tests: podman with this machine's private configuration
(scripts/podman_config.py), the stand-in build image (scripts/stand_in_image.py) and a feedstock
tree whose recipe builds the PyTorch-shaped test project.

`podman_unavailable()` says why the machine cannot run them (the tests skip with that), `Podman`
runs engine commands with the private configuration, `podman_feedstock` writes the tree.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO_ROOT

TOOLS = ("podman", "runc", "mmdebstrap")
# what the feedstock tree for a real build-locally run holds (the rest of the repository is
# not read by build-locally or build_steps.sh)
TREE = ("build-locally.py", "localbuild", "scripts", "requirements-dev.txt")


def podman_unavailable() -> str | None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install podman runc mmdebstrap; .ci/run does)"
    if os.geteuid() != 0:
        return "the real container tests run rootful podman (CI runs as root)"
    return None


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


def private_podman(folder: Path) -> Podman:
    """podman configured by scripts/podman_config.py, its image store under folder."""
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        from podman_config import write_config
    finally:
        sys.path.pop(0)
    env = dict(os.environ)
    env.update(write_config(folder))
    return Podman(env)


def build_stand_in_image(podman: Podman, root: Path, config: str, pythons: list[Path]) -> str:
    """scripts/stand_in_image.py in the tree (its rootfs tar cached outside the repository)."""
    args = [sys.executable, str(root / "scripts" / "stand_in_image.py"), config]
    for python in pythons:
        args += ["--host-python", str(python)]
    proc = subprocess.run(args, env=podman.env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise AssertionError(f"stand_in_image.py failed: {proc.stdout[-500:]}{proc.stderr[-1000:]}")
    return proc.stdout


def podman_feedstock(root: Path, recipe_source: Path, configs: dict[str, str]) -> Path:
    """build-locally.py, localbuild/, scripts/, recipe/ (its source: the test project, copied
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
