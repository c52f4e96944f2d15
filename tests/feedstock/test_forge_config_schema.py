"""conda-forge.yml's settings in the shapes conda-smithy's schema allows: one line for the
first one it would refuse, naming the setting and what it takes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from feedstock.errors import FeedstockError
from feedstock.forge_config_schema import check_shapes
from tests.support.feedstock_copy import copy_feedstock
from tests.support.paths import REPO_ROOT


def test_this_feedstocks_settings_pass():
    check_shapes(yaml.safe_load((REPO_ROOT / "conda-forge.yml").read_text()))


@pytest.mark.parametrize("config", [
    {"conda_build": {"pkg_format": "2", "zstd_compression_level": 19, "error_overlinking": "yes"}},
    {"conda_build": {"pkg_format": 1}}, {"conda_build": {"pkg_format": "tar"}},
    {"conda_build": {"pkg_format": None}},
    {"skip_render": ["README.md"]}, {"skip_render": None}, {"skip_render": []},
    {"remote_ci_setup": "conda-forge-ci-setup=4"}, {"noarch_platforms": ["linux_64", "win_64"]},
    {"github_actions": {"free_disk_space": ["apt", "docker"], "timeout_minutes": "600"}},
    {"os_version": {"linux_64": "alma9"}}, {"channel_priority": "flexible"},
    {"conda_build_tool": "rattler-build"}, {"templates": {"a": "b"}},
])
def test_shapes_the_schema_allows(config):
    check_shapes(config)


@pytest.mark.parametrize("config, named", [
    ({"conda_build": {"pkg_format": [[2]]}}, "conda_build.pkg_format must be one of tar, 1, 2"),
    ({"conda_build": {"pkg_format": "3"}}, "conda_build.pkg_format must be one of"),
    ({"conda_build": {"pkg_format": True}}, "conda_build.pkg_format must be one of"),
    ({"conda_build": {"zstd_compression_level": "high"}}, "zstd_compression_level must be a whole number"),
    ({"conda_build": ["pkg_format"]}, "conda_build must be a mapping"),
    ({"skip_render": [["README.md"]]}, "skip_render must be a list of strings"),
    ({"skip_render": "README.md"}, "skip_render must be a list of strings"),
    ({"github_actions": {"self_hosted": "sometimes"}}, "github_actions.self_hosted must be true or false"),
    ({"github_actions": {"free_disk_space": ["apt", "all"]}}, "free_disk_space must be true, false or a list"),
    ({"os_version": {"linux_64": "centos6"}}, "os_version.linux_64 must be one of cos7"),
    ({"os_version": ["alma9"]}, "os_version must be a mapping"),
    ({"channel_priority": "loose"}, "channel_priority must be one of strict, flexible, disabled"),
    ({"recipe_dir": ["recipe"]}, "recipe_dir must be a string"),
])
def test_shapes_the_schema_refuses(config, named):
    with pytest.raises(FeedstockError) as caught:
        check_shapes(config)
    line = str(caught.value)
    assert named in line and "\n" not in line and line.endswith("; fix it")


def test_a_long_value_is_shortened_in_the_line():
    with pytest.raises(FeedstockError) as caught:
        check_shapes({"skip_render": [list(range(1000))]})
    assert len(str(caught.value)) < 200


def test_rerender_check_refuses_a_nested_pkg_format_in_one_line(tmp_path: Path):
    root = copy_feedstock(tmp_path / "feedstock")
    forge = root / "conda-forge.yml"
    forge.write_text(forge.read_text().replace("pkg_format: '2'", "pkg_format: [[2]]"))
    before = forge.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "feedstock", "--feedstock-root", str(root), "rerender",
                           "--check"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: conda-forge.yml: conda_build.pkg_format must be one of tar, 1, 2 (conda-smithy's "
        "schema), not [[2]]; fix it"]
    assert forge.read_bytes() == before
