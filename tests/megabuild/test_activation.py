"""The CUDA libtorch activation scripts, run by a real bash the way conda activates."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from megabuild.activation import ACTIVATE, DEACTIVATE, write_activation_scripts
from megabuild.build_env import CUDA_ARCH_LISTS


def run_bash(script: str, env: dict[str, str]) -> str:
    proc = subprocess.run(["bash", "-euc", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    write_activation_scripts(tmp_path, CUDA_ARCH_LISTS["12.9"])
    return tmp_path


SHOW = 'echo "${TORCH_CUDA_ARCH_LIST-<unset>}"'


def test_activation_sets_the_built_arch_list_and_deactivation_removes_it(prefix: Path) -> None:
    out = run_bash(f". {prefix / ACTIVATE}; {SHOW}; . {prefix / DEACTIVATE}; {SHOW}", {})
    assert out.splitlines() == [CUDA_ARCH_LISTS["12.9"], "<unset>"]


def test_a_users_own_value_survives_activation_and_deactivation(prefix: Path) -> None:
    out = run_bash(f". {prefix / ACTIVATE}; {SHOW}; . {prefix / DEACTIVATE}; {SHOW}",
                   {"TORCH_CUDA_ARCH_LIST": "8.0"})
    assert out.splitlines() == ["8.0", "8.0"]
    # set to empty on purpose is also the user's choice
    out = run_bash(f". {prefix / ACTIVATE}; {SHOW}", {"TORCH_CUDA_ARCH_LIST": ""})
    assert out.splitlines() == [""]


def test_scripts_are_rewritten_atomically_and_idempotently(prefix: Path) -> None:
    before = (prefix / ACTIVATE).read_bytes()
    write_activation_scripts(prefix, CUDA_ARCH_LISTS["12.9"])
    assert (prefix / ACTIVATE).read_bytes() == before
    assert not [p for p in (prefix / ACTIVATE).parent.iterdir() if p.name.endswith(".tmp")]


def test_family_targets_reach_downstream_builds_in_the_form_cpp_extension_takes(tmp_path: Path) -> None:
    """torch.utils.cpp_extension (2.13.0, 2.14.1) refuses `10.0f`: a libtorch built with family
    targets exports their plain form, deduplicated; `a` targets and +PTX stay as they were."""
    write_activation_scripts(tmp_path, "9.0a;10.0;10.0f;12.0f+PTX")
    out = run_bash(f". {tmp_path / ACTIVATE}; {SHOW}", {})
    assert out.splitlines() == ["9.0a;10.0;12.0+PTX"]
