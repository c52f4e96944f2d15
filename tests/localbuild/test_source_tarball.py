"""`build-locally.py --source-tarball FILE` (localbuild/source_tarball.py): a build machine
without network builds from a tarball fetched elsewhere.

The feedstock tree here has the real recipe/ with its source replaced by a url nothing listens
on (http://127.0.0.1:9/...) and the sha256 of a real tarball of the PyTorch-shaped test project.
Real py-rattler-build (--native --tool rattler-build, an empty local channel: offline) shows the
three answers: without the option the download fails and build-locally names the url, the
sha256 and the option; a wrong file is one line before anything starts; the right file passes
the source step (extracted into the work folder, then the solve fails against the empty channel)
and, for a recipe without requirements, builds a package. conda-build is not installed here:
its side (the file copied into its source cache, --cache-dir) runs build_steps.sh with the
recording stand-in `conda` the other build_steps tests use.
"""
from __future__ import annotations

import os

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.realbuild.feedstock_build import prepare_project_source, replace_source
from tests.support.build_locally import install_fake_conda, make_feedstock, read_jsonl
from tests.support.paths import CPU_GENERIC_JOB, RECIPE_VERSION, REPO_ROOT
from localbuild.configs import host_platform
from localbuild.source_tarball import conda_build_cache_name, download_failed, read_recipe_source

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
    job = (REPO_ROOT / ".ci_support" / f"{CPU_GENERIC_JOB}.yaml").read_text()
    assert "channel_sources:\n- conda-forge\n" in job
    sources = str(channel) if channel_sources == "local" else channel_sources
    (fs.root / ".ci_support" / f"{CPU_GENERIC_JOB}.yaml").write_text(
        job.replace("channel_sources:\n- conda-forge\n", f"channel_sources:\n- {sources}\n"))
    return fs


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def python_with_rattler_build() -> str:
    if host_platform() != "linux-64":
        pytest.skip(f"the test job is linux-64; this host is {host_platform()}")
    if subprocess.run([sys.executable, "-c", "import rattler_build.cli_api"], capture_output=True).returncode:
        pytest.skip("py-rattler-build (requirements-dev.txt) is not installed in this Python")
    return sys.executable


def rattler_native(fs, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = fs.env(RATTLER_BUILD_PYTHON=python_with_rattler_build())
    return fs.run(CPU_GENERIC_JOB, "--native", "--tool", "rattler-build", "--min-free-gb", "0", *args, env=env,
                  timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stdout + proc.stderr
    return lines[0]


# --- (a) no option: rattler-build really fails the download, build-locally names the file ------

def test_a_failed_download_names_the_url_the_sha256_and_the_option(tmp_path, tarball):
    fs = offline_feedstock(tmp_path, tarball)
    proc = rattler_native(fs)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    hint = (f"source {URL} (sha256 {sha256(tarball)}) could not be downloaded; fetch it where the "
            "network reaches and pass --source-tarball FILE")
    assert f"[1/1 {CPU_GENERIC_JOB}] failed ({hint}) after " in proc.stdout
    summary = proc.stdout[proc.stdout.index("summary: 1 config(s)"):]
    assert f"failed ({hint})" in summary                  # the summary row carries it too
    log = (fs.artifacts / f"{CPU_GENERIC_JOB}-log.txt").read_text()
    assert "Failed to download from URL" in log and hint in log   # rattler-build's words, then ours
    assert not fs.marker(CPU_GENERIC_JOB).exists()


# --- (b) a wrong file: one line, exit 2, nothing written -----------------------------------------

@pytest.mark.parametrize("given", ["another file", "missing", "folder", "link loop", "fifo", "device"])
def test_a_wrong_tarball_is_one_line_exit_2_and_nothing_written(tmp_path, tarball, given):
    fs = offline_feedstock(tmp_path, tarball)
    recipe_before = tree_bytes(fs.root / "recipe")
    path = tmp_path / "fetched" / f"pytorch-v{RECIPE_VERSION}.tar.gz"
    path.parent.mkdir()
    if given == "another file":     # e.g. an interrupted download
        path.write_bytes(tarball.read_bytes()[:1000])
    elif given == "folder":
        path.mkdir()
    elif given == "link loop":
        path.symlink_to(path.name)
    elif given == "fifo":           # hashing it would wait forever for a writer
        os.mkfifo(path)
    elif given == "device":         # hashing it would never end
        path.symlink_to("/dev/zero")
    proc = rattler_native(fs, "--source-tarball", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = one_error_line(proc)
    assert line.startswith(f"error: --source-tarball {path}")
    expected = {"another file": f"has sha256 {sha256(path) if path.is_file() else ''}, but recipe/recipe.yaml "
                                f"wants {sha256(tarball)} ({URL}); fetch that file again",
                "missing": f": no such file; fetch pytorch-v{RECIPE_VERSION}.tar.gz from {URL}",
                "folder": " is a folder; give the tarball itself",
                "link loop": ": cannot read it (Too many levels of symbolic links)",
                "fifo": ": cannot read it (a FIFO, not a regular file)",
                "device": ": cannot read it (a character device, not a regular file)"}[given]
    assert expected in line
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not fs.artifacts.exists()                                   # nothing written
    assert tree_bytes(fs.root / "recipe") == recipe_before


def test_debug_and_test_only_refuse_the_option(tmp_path, tarball):
    fs = offline_feedstock(tmp_path, tarball)
    for flag in ("--debug", "--test-only"):
        proc = fs.run(CPU_GENERIC_JOB, flag, "--source-tarball", str(tarball), "--dry-run")
        assert proc.returncode == 2
        assert "--source-tarball feeds a build, which --debug" in one_error_line(proc)


# --- (c) the right file: no download, the source step passes -------------------------------------

def test_the_right_tarball_passes_the_source_step_without_network(tmp_path, tarball):
    """The feedstock's recipe: rattler-build takes the file (sha256 checked again), extracts the
    test project into the work folder and goes on to solve, which fails against the empty
    channel: past the source step, with no download tried and the user's recipe untouched."""
    fs = offline_feedstock(tmp_path, tarball)
    recipe_before = tree_bytes(fs.root / "recipe")
    proc = rattler_native(fs, "--source-tarball", str(tarball))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    log = (fs.artifacts / f"{CPU_GENERIC_JOB}-log.txt").read_text()
    assert "error: rattler-build failed: Failed to resolve dependencies" in log, log[-2000:]
    assert not download_failed(fs.artifacts / f"{CPU_GENERIC_JOB}-log.txt")
    assert f"[1/1 {CPU_GENERIC_JOB}] failed (exit 1: error: rattler-build failed: Failed to resolve dependencies" in proc.stdout   # its reason, no download hint
    work = [w for w in fs.artifacts.glob("bld/rattler-build_libtorch-split_*/work") if any(w.iterdir())]
    assert work and (work[0] / "pyproject.toml").is_file() and (work[0] / "NOTICE").is_file()
    # the tool read the derived copy: first url the link (named as the url's file), then the own
    link = fs.artifacts / "localbuild" / "source" / f"pytorch-v{RECIPE_VERSION}.tar.gz"
    assert link.is_symlink() and link.resolve() == tarball.resolve()
    derived = fs.artifacts / "localbuild" / f"{CPU_GENERIC_JOB}-recipe"
    text = (derived / "recipe.yaml").read_text()
    assert f'  url: ["{link.as_uri()}", "{UNREACHABLE.format(version="${{ version }}")}"]\n' in text
    assert f"  sha256: {sha256(tarball)}\n" in text
    assert (derived / "patches").is_dir() and (derived / "build.sh").is_file()
    [entry] = [json.loads(p.read_text()) for p in (fs.artifacts / "src_cache" / ".metadata").glob("*.json")]
    assert entry["url"] == link.as_uri() and entry["extracted_path"]
    assert tree_bytes(fs.root / "recipe") == recipe_before             # the user's recipe as it was


def test_the_right_tarball_builds_a_package_offline(tmp_path, tarball):
    """A whole build: a recipe without requirements whose source is an unreachable url of
    another name (test_project-1.0.tar.gz); the package holds a file of the tarball."""
    from rattler import PathsJson

    fs = offline_feedstock(tmp_path, tarball)
    (fs.root / "recipe" / "recipe.yaml").write_text(
        'context:\n  version: "1.0"\npackage:\n  name: offline-hello\n  version: ${{ version }}\n'
        "source:\n  url: http://127.0.0.1:9/test_project-${{ version }}.tar.gz\n"
        f"  sha256: {sha256(tarball)}\n"
        "build:\n  number: 0\n  script:\n    - mkdir -p $PREFIX/share\n"
        "    - cp NOTICE $PREFIX/share/offline-notice.txt\n")
    proc = rattler_native(fs, "--source-tarball", str(tarball))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [package] = fs.artifacts.glob("linux-64/offline-hello-1.0-*.conda")
    paths = [str(entry.relative_path) for entry in PathsJson.from_package_archive(package).paths]
    assert "share/offline-notice.txt" in paths
    assert fs.marker(CPU_GENERIC_JOB).exists()
    assert (fs.artifacts / "localbuild" / "source" / "test_project-1.0.tar.gz").is_symlink()


# --- where the file goes: containers, conda-build's cache, Slurm tasks --------------------------

def _value(argv: list[str], prefix: str) -> str:
    return next(arg[len(prefix):] for arg in argv if arg.startswith(prefix))


@pytest.mark.parametrize("tool", ["conda-build", "rattler-build"])
def test_a_container_gets_the_file_mounted_read_only(tmp_path, tarball, tool):
    fs = offline_feedstock(tmp_path, tarball, channel_sources="conda-forge")
    inside = f"/home/conda/source_tarball/pytorch-v{RECIPE_VERSION}.tar.gz"
    dry = fs.run(CPU_GENERIC_JOB, "--tool", tool, "--source-tarball", str(tarball), "--min-free-gb", "0", "--dry-run")
    assert f"  mount:      {tarball} at {inside} (read-only)\n" in dry.stdout, dry.stdout + dry.stderr
    proc = fs.run(CPU_GENERIC_JOB, "--tool", tool, "--source-tarball", str(tarball), "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = fs.runs()
    assert f"{tarball}:{inside}:ro,z" in run["argv"]
    assert f"SOURCE_TARBALL={inside}" in run["argv"]
    derived = fs.artifacts / "localbuild" / f"{CPU_GENERIC_JOB}-recipe"
    if tool == "conda-build":
        name = _value(run["argv"], "SOURCE_CACHE_NAME=")
        assert name == f"pytorch-v{RECIPE_VERSION}_{sha256(tarball)[:10]}.tar.gz"
        assert not derived.exists()
    else:
        assert _value(run["argv"], "RECIPE_ROOT=") == f"/home/conda/feedstock_root/build_artifacts/localbuild/{derived.name}"
        assert f'url: ["file://{inside}", "http://127.0.0.1:9/' in (derived / "recipe.yaml").read_text()
        assert not (fs.artifacts / "localbuild" / "source").exists()   # no link: the mount has the name


def test_conda_build_finds_the_file_in_its_source_cache(tmp_path, tarball):
    """build_steps.sh copies the file to <croot>/src_cache/ under conda-build's own name for the
    download and passes --cache-dir (the stand-in conda records the call)."""
    if host_platform() != "linux-64":
        pytest.skip(f"the test job is linux-64; this host is {host_platform()}")
    fs = offline_feedstock(tmp_path, tarball, channel_sources="conda-forge")
    install_fake_conda(fs.bin_dir)
    calls = tmp_path / "conda-calls.jsonl"
    proc = fs.run(CPU_GENERIC_JOB, "--native", "--source-tarball", str(tarball), "--min-free-gb", "0",
                  env=fs.env(FAKE_CONDA_LOG=str(calls)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build = next(c for c in read_jsonl(calls) if c["argv"][0] == "build")
    assert build["argv"][build["argv"].index("--cache-dir") + 1] == str(fs.artifacts)
    cached = fs.artifacts / "src_cache" / f"pytorch-v{RECIPE_VERSION}_{sha256(tarball)[:10]}.tar.gz"
    assert cached.read_bytes() == tarball.read_bytes() and not cached.is_symlink()
    assert f"source from --source-tarball: {cached}" in proc.stdout


def test_conda_build_cache_name_is_conda_builds():
    """conda_build/source.py: append_hash_to_fn(basename(url), sha256) puts the first 10 digits
    before the extension, `.tar.gz` counting as one."""
    source = read_recipe_source(REPO_ROOT / "recipe" / "meta.yaml", "recipe/meta.yaml")
    assert source.url == (f"https://github.com/pytorch/pytorch/releases/download/v{RECIPE_VERSION}/"
                          f"pytorch-v{RECIPE_VERSION}.tar.gz")
    assert conda_build_cache_name(source) == f"pytorch-v{RECIPE_VERSION}_{source.sha256[:10]}.tar.gz"
    v1 = read_recipe_source(REPO_ROOT / "recipe" / "recipe.yaml", "recipe/recipe.yaml")
    assert (v1.url, v1.sha256) == (source.url, source.sha256)


def test_a_hostile_url_line_is_read_in_linear_time(tmp_path):
    """The url pattern retried every length of a lazy value before trailing blanks (16 KB of
    them: 4 s), and the cache name every start of a name of dots: both now read 256 KB at once,
    with the same value as before (blanks and the comment cut, `.tar.gz` one extension)."""
    import time
    sha = "ab" * 32
    recipe = tmp_path / "meta.yaml"
    recipe.write_text("{% set version = \"1\" %}\nsource:\n  url: https://example.org/x/pytorch-v1.tar.gz" + " " * 256_000
                      + "  # comment\n  sha256: " + sha + "\n")
    started = time.perf_counter()
    source = read_recipe_source(recipe, "recipe/meta.yaml")
    assert time.perf_counter() - started < 1
    assert source.url == "https://example.org/x/pytorch-v1.tar.gz"
    assert conda_build_cache_name(source) == f"pytorch-v1_{sha[:10]}.tar.gz"
    dots = tmp_path / "dots.yaml"
    dots.write_text("{% set version = \"1\" %}\nsource:\n  url: https://example.org/a" + "." * 256_000 + "\n  sha256: " + sha + "\n")
    started = time.perf_counter()
    name = conda_build_cache_name(read_recipe_source(dots, "recipe/meta.yaml"))
    assert time.perf_counter() - started < 1 and name == "a" + "." * 256_000   # no extension: as it is


def test_a_slurm_task_gets_the_file_with_the_other_build_options(tmp_path, tarball):
    fs = offline_feedstock(tmp_path, tarball, channel_sources="conda-forge")
    proc = fs.run(CPU_GENERIC_JOB, "--scheduler", "slurm", "--tool", "rattler-build", "--source-tarball",
                  str(tarball), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    options = json.loads(lines[next(i for i, line in enumerate(lines) if "build_request" in line) + 1])
    assert options["source_tarball"] == str(tarball)
    job_dir = fs.artifacts / "slurm" / "task-test"
    job_dir.mkdir(parents=True)
    (job_dir / "job.json").write_text(json.dumps({"build_request": options}))
    task = fs.run(CPU_GENERIC_JOB, "--force", "--array-task", str(job_dir), "--min-free-gb", "0", "--dry-run",
                  env=fs.env(RATTLER_BUILD_PYTHON=sys.executable))
    assert task.returncode == 0, task.stderr
    link = fs.artifacts / "localbuild" / "source" / f"pytorch-v{RECIPE_VERSION}.tar.gz"
    assert f"source:       {tarball} (sha256 matches recipe/recipe.yaml: {URL})" in task.stdout
    assert f"  link:       {link} -> {tarball} (would be written)" in task.stdout
    assert f"--recipe {fs.artifacts}/localbuild/{CPU_GENERIC_JOB}-recipe/recipe.yaml" in task.stdout


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
    ("build_steps.sh: error: could not download Miniforge from https://x; set MINIFORGE_URL\n", False),
])
def test_the_log_scan_knows_each_tools_wording(tmp_path, text, failed):
    log = tmp_path / "log.txt"
    log.write_bytes(b"x" * ((1 << 20) - 12) + text.encode())   # across the scan's 1 MiB blocks
    assert download_failed(log) is failed
