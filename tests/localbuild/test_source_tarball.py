"""A build that cannot download the recipe's source (localbuild/source_tarball.py) says which
file: the url, the sha256 and --source-tarball, on its failed line and in the summary.

The feedstock tree here has the real recipe/ with its source replaced by a url nothing listens
on (http://127.0.0.1:9/...) and the sha256 of a real tarball of the PyTorch-shaped test project;
real py-rattler-build (--native --tool rattler-build, an empty local channel: offline) fails
the download.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.realbuild.feedstock_build import prepare_project_source, replace_source
from tests.support.build_locally import make_feedstock
from tests.support.paths import RECIPE_VERSION, REPO_ROOT
from localbuild.configs import host_platform
from localbuild.source_tarball import download_failed

JOB = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
UNREACHABLE = "http://127.0.0.1:9/pytorch-v{version}.tar.gz"   # port 9 (discard): nobody answers
URL = UNREACHABLE.format(version=RECIPE_VERSION)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory) -> Path:
    """pytorch-v<recipe version>.tar.gz: the test project under one top folder, as the release is."""
    work = tmp_path_factory.mktemp("source")
    source = prepare_project_source(work / f"pytorch-v{RECIPE_VERSION}", "scikit-build-core")
    path = work / "download" / f"pytorch-v{RECIPE_VERSION}.tar.gz"
    path.parent.mkdir()
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        tar.add(source, arcname=source.name)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def offline_feedstock(tmp_path: Path, tarball: Path, channel_sources: str = "local"):
    """The tree: the real recipe/ (both recipes' source: the unreachable url, the tarball's
    sha256, no patches), the cpu job with an empty local channel as its channel_sources."""
    fs = make_feedstock(tmp_path, configs={})
    shutil.rmtree(fs.root / "recipe")
    shutil.copytree(REPO_ROOT / "recipe", fs.root / "recipe", ignore=shutil.ignore_patterns("__pycache__"))
    for name, version in (("recipe.yaml", "${{ version }}"), ("meta.yaml", "{{ version }}")):
        recipe = fs.root / "recipe" / name
        recipe.write_text(replace_source(recipe.read_text(), f"  url: {UNREACHABLE.format(version=version)}\n"
                                                            f"  sha256: {sha256(tarball)}\n"))
    channel = tmp_path / "channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}}')
    job = (REPO_ROOT / ".ci_support" / f"{JOB}.yaml").read_text()
    assert "channel_sources:\n- conda-forge\n" in job
    sources = str(channel) if channel_sources == "local" else channel_sources
    (fs.root / ".ci_support" / f"{JOB}.yaml").write_text(
        job.replace("channel_sources:\n- conda-forge\n", f"channel_sources:\n- {sources}\n"))
    return fs


def python_with_rattler_build() -> str:
    if host_platform() != "linux-64":
        pytest.skip(f"the test job is linux-64; this host is {host_platform()}")
    if subprocess.run([sys.executable, "-c", "import rattler_build.cli_api"], capture_output=True).returncode:
        pytest.skip("py-rattler-build (requirements-dev.txt) is not installed in this Python")
    return sys.executable


def rattler_native(fs, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = fs.env(RATTLER_BUILD_PYTHON=python_with_rattler_build())
    return fs.run(JOB, "--native", "--tool", "rattler-build", "--min-free-gb", "0", *args, env=env,
                  timeout=timeout)


# --- (a) no option: rattler-build really fails the download, build-locally names the file ------

def test_a_failed_download_names_the_url_the_sha256_and_the_option(tmp_path, tarball):
    fs = offline_feedstock(tmp_path, tarball)
    proc = rattler_native(fs)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    hint = (f"source {URL} (sha256 {sha256(tarball)}) could not be downloaded; fetch it where the "
            "network reaches and pass --source-tarball FILE")
    assert f"[1/1 {JOB}] failed ({hint}) after " in proc.stdout
    summary = proc.stdout[proc.stdout.index("summary: 1 config(s)"):]
    assert f"failed ({hint})" in summary                  # the summary row carries it too
    log = (fs.artifacts / f"{JOB}-log.txt").read_text()
    assert "Failed to download from URL" in log and hint in log   # rattler-build's words, then ours
    assert not fs.marker(JOB).exists()


# --- the wording the scan looks for ---------------------------------------------------------------

@pytest.mark.parametrize("text, failed", [
    # rattler-build 0.58+ (rattler_build_source_cache CacheError::Download), through our py driver
    ("error: rattler-build failed: Failed to download from URL: Request failed after 3 retries\n", True),
    # rattler-build before its source cache crate (SourceError::Url)
    (" × Failed to download source from url: error sending request for url (https://x/y.tar.gz)\n", True),
    # conda-build's download_to_cache after every url failed
    ("RuntimeError: Could not download https://github.com/pytorch/pytorch/releases/download/v2.14.1/"
     "pytorch-v2.14.1.tar.gz\n", True),
    ("error: rattler-build failed: Failed to resolve dependencies\n", False),
    ("Failed to download attestation bundle from https://x: 404\n", False),
    ("build_steps.sh: could not download Miniforge from https://x; set MINIFORGE_URL\n", False),
])
def test_the_log_scan_knows_each_tools_wording(tmp_path, text, failed):
    log = tmp_path / "log.txt"
    log.write_bytes(b"x" * ((1 << 20) - 12) + text.encode())   # across the scan's 1 MiB blocks
    assert download_failed(log) is failed
