"""The dry run's outputs with the real renderer: rendered in one batch per core (`python -m
feedstock render --batch`), they are what each config's own `render CONFIG --json` process says,
config by config; a config that cannot render is its own `cannot render` line, as it was."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.feedstock_copy import copy_feedstock
from tests.support.paths import CPU_GENERIC_JOB, REPO_ROOT

pytest.importorskip("jinja2")   # the renderer's processes run under this Python

# what build-locally and its renderer read, for a copy to break
TREE = ("build-locally.py", "localbuild", "common", "feedstock", "recipe", ".ci_support", "pinning.yaml",
        "conda-forge.yml", "ci-runners.yml")
HINT = "; run `python -m feedstock render {name}` (needs requirements-dev.txt)"


def dry_run(root: Path, *args: str) -> subprocess.CompletedProcess:
    """build-locally.py --dry-run with the standard library only (-S); its renderer runs under
    this Python, which has the renderer's packages. No shell's dev tag reaches it."""
    env = {k: v for k, v in os.environ.items() if k != "FEEDSTOCK_DEV_TAG"}
    return subprocess.run([sys.executable, "-S", str(root / "build-locally.py"), "--dry-run", "--min-free-gb", "0",
                           *args], cwd=root, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def outputs_by_config(stdout: str) -> dict[str, list[str]]:
    """config -> its `outputs:` line and the output lines under it."""
    found: dict[str, list[str]] = {}
    name, block = None, None
    for line in stdout.splitlines():
        header = re.match(r"== \[\d+/\d+\] (\S+): ", line)
        if header:
            name, block = header.group(1), None
        elif line.startswith("outputs:"):
            block = found[name] = [line]
        elif block is not None and line.startswith("  "):
            block.append(line)
        else:
            block = None
    return found


def alone(name: str, root: Path = REPO_ROOT, env: dict[str, str] | None = None) -> list[str]:
    """The lines the dry run printed for a config rendered by its own `render CONFIG --json`."""
    proc = run_feedstock_cli("render", name, "--json", root=root, env=env)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1].removeprefix("error: ")
        return [f"outputs:      cannot render ({last})" + HINT.format(name=name)]
    outputs = json.loads(proc.stdout)
    return [f"outputs:      {len(outputs)}"] + [f"  {o['name']}-{o['version']}-{o['build_string']}" for o in outputs]


def test_every_configs_outputs_are_what_its_own_render_prints(monkeypatch):
    """--all --emulate --force plans every linux config (aarch64 too): each one's outputs are
    its own render's, and a dev tag reaches the render of its config and no other."""
    monkeypatch.delenv("FEEDSTOCK_DEV_TAG", raising=False)
    configs = sorted(p.stem for p in (REPO_ROOT / ".ci_support").glob("linux_*.yaml"))
    if not configs:
        pytest.skip(".ci_support/ has no configs (python -m feedstock rerender)")
    proc = dry_run(REPO_ROOT, "--all", "--emulate", "--force")
    assert proc.returncode == 0, proc.stderr
    shown = outputs_by_config(proc.stdout)
    assert sorted(shown) == configs
    for name in configs:
        assert shown[name] == alone(name), name
    tagged = dry_run(REPO_ROOT, CPU_GENERIC_JOB, "--dev-tag", "abc")
    assert tagged.returncode == 0, tagged.stderr
    expected = alone(CPU_GENERIC_JOB, env={"FEEDSTOCK_DEV_TAG": "abc"})
    assert outputs_by_config(tagged.stdout) == {CPU_GENERIC_JOB: expected}
    assert all("-devabc_" in line for line in expected[1:])


def test_a_config_that_cannot_render_is_its_line_and_the_others_render(tmp_path):
    """One config's render fails (an undefined name under a selector only it takes): its plan
    says `cannot render` with the line `render CONFIG` ends with; the configs rendered beside it
    in the same batch print their outputs."""
    if not (REPO_ROOT / ".ci_support" / f"{CPU_GENERIC_JOB}.yaml").is_file():
        pytest.skip(".ci_support/ has no configs (python -m feedstock rerender)")
    tree = copy_feedstock(tmp_path / "tree", TREE)
    meta = tree / "recipe" / "meta.yaml"
    meta.write_text('{% set broken = zz_undefined_here.x %}  # [blas_impl == "generic" and gpu_backend == "cpu"]\n'
                    + meta.read_text())
    proc = dry_run(tree, "--all", "--force")
    assert proc.returncode == 0, proc.stderr
    shown = outputs_by_config(proc.stdout)
    assert shown[CPU_GENERIC_JOB] == alone(CPU_GENERIC_JOB, root=tree)
    assert "'zz_undefined_here' is undefined" in shown[CPU_GENERIC_JOB][0]
    others = [name for name in shown if name != CPU_GENERIC_JOB]
    assert others and all(re.fullmatch(r"outputs:      \d+", shown[name][0]) for name in others)
