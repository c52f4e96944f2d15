"""build-locally.py against this repository itself: --help always, the real .ci_support/ when
it has been generated (python -m feedstock rerender)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.support.build_locally import REPO_ROOT, as_strings
from localbuild import ci_yaml

CI_SUPPORT = REPO_ROOT / ".ci_support"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", str(REPO_ROOT / "build-locally.py"), *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def real_configs() -> list:
    configs = sorted(p for p in CI_SUPPORT.glob("*.yaml") if not p.name.startswith("clobber_"))
    if not configs:
        pytest.skip(f"{CI_SUPPORT} has no configs yet (generate with `python -m feedstock rerender`)")
    return configs


def test_help_in_the_repository():
    proc = run("--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage: build-locally.py" in proc.stdout


def test_real_configs_parse_like_pyyaml():
    for path in real_configs():
        text = path.read_text()
        assert ci_yaml.parse(text, str(path)).data == as_strings(yaml.safe_load(text)), path.name


def test_real_configs_list_and_dry_run():
    configs = real_configs()
    proc = run("--list")
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()] == [p.stem for p in configs]
    assert all("GB disk" in line for line in proc.stdout.splitlines())
    proc = run("--dry-run", "--all")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("== [") == len(configs)
    linux = [p for p in configs if p.name.startswith("linux")]
    other_arch = proc.stdout.count("skipped:      needs a linux-")   # aarch64 image on x86_64
    assert proc.stdout.count("command:      docker run ") + other_arch == len(linux)
    assert "dry run: nothing was started or written" in proc.stdout
