"""feedstock/after_build/image/pip_step.py: what pip wrote for the build stage's wheels names no
build-time path, so `pip freeze` in the image prints NAME==VERSION."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from feedstock.after_build.image.pip_step import forget_build_stage_urls

SITE = "opt/env/lib/python3.11/site-packages"


def _dist_info(out: Path, name: str, url: str | None) -> Path:
    info = out / SITE / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    lines = [f"{name}/__init__.py,sha256=abc,10", f"{info.name}/METADATA,sha256=def,20"]
    if url is not None:
        (info / "direct_url.json").write_text(json.dumps({"url": url, "archive_info": {}}))
        lines.append(f"{info.name}/direct_url.json,sha256=ghi,30")
    lines.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    return info


def test_the_build_stages_wheel_urls_are_dropped_with_their_record_lines(tmp_path: Path):
    built = _dist_info(tmp_path, "torch_scatter", "file:///pip-wheels/torch_scatter-1.0-cp311-cp311-linux_x86_64.whl")
    linked = _dist_info(tmp_path, "six", "https://files.example.org/six-1.0-py3-none-any.whl")
    plain = _dist_info(tmp_path, "idna", None)
    assert forget_build_stage_urls(tmp_path) == ["torch_scatter-1.0.dist-info"]
    assert not (built / "direct_url.json").exists()
    assert "direct_url.json" not in (built / "RECORD").read_text()
    assert (built / "RECORD").read_text().startswith("torch_scatter/__init__.py,sha256=abc,10\n")
    assert (linked / "direct_url.json").is_file() and "direct_url.json" in (linked / "RECORD").read_text()
    assert not (plain / "direct_url.json").exists()


def test_a_broken_direct_url_is_left_as_pip_wrote_it(tmp_path: Path):
    info = _dist_info(tmp_path, "odd", "file:///pip-wheels/odd.whl")
    (info / "direct_url.json").write_text("not json")
    assert forget_build_stage_urls(tmp_path) == []
    assert (info / "direct_url.json").read_text() == "not json"


@pytest.mark.download   # pip install from a local folder into a prefix
def test_an_sdist_whose_isolated_build_cannot_start_names_its_line_and_the_mark(tmp_path: Path):
    """Real pip, offline, with --find-links as the image's pip step runs it: an sdist line
    without the mark fails in its isolated build environment (no setuptools in the folder)."""
    import subprocess
    import sys

    from feedstock.after_build.image.envfile import Line
    from feedstock.after_build.image.pip_step import isolated_build_failure
    from tests.support.sdist import write_sdist

    links = tmp_path / "links"
    links.mkdir()
    write_sdist(links / "tiny_ext-0.1.tar.gz", "tiny_ext-0.1",
                {"setup.py": "from setuptools import setup\nsetup(name='tiny-ext', version='0.1')\n"}, name="tiny-ext")
    options = ["--only-binary=:none:"]
    runtime = [Line("env.yml:9", "tiny-ext==0.1")]
    (tmp_path / "requirements.txt").write_text("".join(f"{text}\n" for text in [*options, "tiny-ext==0.1"]))
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
                           "--root", str(tmp_path / "out"), "--no-index", "--find-links", str(links),
                           "-r", str(tmp_path / "requirements.txt")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode != 0
    line = isolated_build_failure(proc.stdout + proc.stderr, options, runtime)
    assert line == ("env.yml:9: 'tiny-ext==0.1' is built by pip in an isolated environment, and pip cannot "
                    "install its build requirements (no distribution of setuptools>=40.8.0 to be found); mark "
                    "the line --no-build-isolation: the build stage then builds it with the image's own torch "
                    "and build tools")
    assert isolated_build_failure("ERROR: No matching distribution found for six", options, runtime) is None
