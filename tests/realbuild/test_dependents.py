"""Dependents nobody here wrote, built and tested against our real packages (issue 18), through
`python -m feedstock downstream` as a user runs it (recipe/dependents.yaml):

- torchvision 0.29.1's wheel, pip-installed into the pytorch-gpu 2.14.1 prefix of the real CUDA
  binaries: pip installs no torch and no NVIDIA wheel; nms, roi_align and deform_conv2d run on
  the CPU against our libtorch;
- torch-scatter 2.1.2 from its PyPI sdist, built by rattler-build against our libtorch and
  pytorch 2.13.0 (the real CPU binaries), pinned by their run_exports, installed by rattler;
- einops 0.8.2 from its wheel, packaged noarch and its own test suite run against our pytorch;
- a dependent whose build fails: a failed row with the compiler's first error line.

The session fixtures (tests/realbuild/conftest.py) are the packages' own; nothing here builds
them again.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.realbuild.downstream_cache import run_downstream_cache
from tests.support.compile_counts import downstream_compiles
from tests.support.paths import REPO_ROOT
from tests.support.scratch import module_scratch

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")
pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

from tests.realbuild.real_packages import WHEEL_PYTHON  # noqa: E402

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.download]


def downstream(work: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, dict]]:
    """The command as a user runs it; (process, rows by name from its --json file). Give it
    --cache run_downstream_cache(...) unless the test has a cache of its own."""
    work.mkdir(parents=True, exist_ok=True)
    report = work / "rows.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # the sdist/wheel downloads are cached outside the repository (docs/dependents.md)
    proc = subprocess.run([sys.executable, "-m", "feedstock", "--feedstock-root", str(REPO_ROOT), "downstream",
                           "--work", str(work / "work"), "--json", str(report), *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=3600)
    rows = {row["name"]: row for row in json.loads(report.read_text())} if report.is_file() else {}
    return proc, rows


def table_rows(stdout: str) -> dict[str, list[str]]:
    return {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")]
                                          for line in stdout.splitlines() if line.startswith("| "))}


@pytest.fixture(scope="module")
def cpu_run(request: pytest.FixtureRequest, wheelbuild: dict, realbuild_toolchain: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = module_scratch(request, tmp_path_factory, "downstream-cpu")
    variant = realbuild_toolchain["variant"]((WHEEL_PYTHON,), work / "cpu-py311.yaml")
    proc, rows = downstream(work, "torch-scatter", "einops", "--channel", str(wheelbuild["build"].output_dir),
                            "--with-channel", str(realbuild_toolchain["toolchain"].channel), "--variant", str(variant),
                            "--cache", str(run_downstream_cache(tmp_path_factory)))
    return {"proc": proc, "rows": rows, "work": work / "work"}


@pytest.fixture(scope="module")
def gpu_run(request: pytest.FixtureRequest, cudawheel: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = module_scratch(request, tmp_path_factory, "downstream-gpu")
    extra = [arg for channel in cudawheel["channels"][1:] for arg in ("--with-channel", str(channel))]
    proc, rows = downstream(work, "torchvision", "--channel", str(cudawheel["build"].output_dir), *extra,
                            "--env", f"gpu={cudawheel['prefix']}", "--cache", str(run_downstream_cache(tmp_path_factory)))
    return {"proc": proc, "rows": rows, "prefix": cudawheel["prefix"], "python": cudawheel["python"]}


def test_torchvision_wheel_on_our_gpu_prefix(gpu_run):
    proc, row = gpu_run["proc"], gpu_run["rows"].get("torchvision")
    assert proc.returncode == 0 and row, proc.stdout + proc.stderr
    assert (row["built"], row["imported"], row["result"]) == ("pip wheel", "yes", "passed"), row
    assert row["against"].startswith("2.14.1 cuda130_generic_py311")
    assert (row["passed"], row["failed"]) == (4, 0), row  # nms, roi_align, deform_conv2d, the libtorch loaded
    assert table_rows(proc.stdout)["torchvision"][-1] == "passed"


def test_pip_left_our_torch_alone(gpu_run):
    site = gpu_run["prefix"] / f"lib/python{WHEEL_PYTHON}/site-packages"
    assert list(site.glob("torchvision-0.29.1.dist-info")), "torchvision not installed"
    assert not list(site.glob("nvidia*")), "pip installed NVIDIA wheels"
    [torch_dist] = site.glob("torch-*.dist-info")  # one torch: ours
    assert torch_dist.name.startswith("torch-2.14.1")
    conda_torch = json.loads(next((gpu_run["prefix"] / "conda-meta").glob("pytorch-2.14.1-*.json")).read_text())
    assert any(f.startswith(f"lib/python{WHEEL_PYTHON}/site-packages/{torch_dist.name}/") for f in conda_torch["files"])
    check = subprocess.run([str(gpu_run["python"]), "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


def test_torch_scatter_from_its_sdist_against_our_libtorch(cpu_run):
    proc, row = cpu_run["proc"], cpu_run["rows"].get("torch-scatter")
    assert row, proc.stdout + proc.stderr
    assert (row["built"], row["imported"], row["result"]) == ("rattler-build sdist", "yes", "passed"), row
    assert row["against"].startswith("2.13.0 cpu_generic_py311")
    assert row["passed"] >= 10 and row["failed"] == 0, row
    # compiled for real: every translation unit went through the compiler (ccache launching it;
    # a machine that built it before serves the objects, but the compiler ran for each)
    assert downstream_compiles(proc.stderr, "torch-scatter") >= 4, proc.stderr[-3000:]


def test_torch_scatter_is_pinned_to_our_libtorch_minor(cpu_run):
    from rattler_build import Package

    [package] = cpu_run["work"].glob("torch-scatter/build/output/linux-64/torch-scatter-2.1.2-*.conda")
    depends = [str(d) for d in Package.from_file(package).depends]
    # libtorch's and pytorch's run_exports (no stable C++ ABI: the same x.y)
    assert "libtorch >=2.13.0,<2.14.0a0" in depends, depends
    assert "pytorch >=2.13.0,<2.14.0a0" in depends, depends
    assert any(d.startswith("python >=3.11,<3.12") for d in depends), depends
    # its compiled ops link the packaged libtorch through the prefix, not a build path
    env = cpu_run["work"] / "envs" / "torch-scatter"
    [ext] = env.glob(f"lib/python{WHEEL_PYTHON}/site-packages/torch_scatter/_scatter_cpu.so")
    dynamic = subprocess.run(["readelf", "-d", str(ext)], capture_output=True, text=True).stdout
    assert "libtorch_cpu.so" in dynamic or "libc10.so" in dynamic, dynamic
    assert "/bld/" not in dynamic and "host_env" not in dynamic, dynamic


def test_einops_own_suite_against_our_pytorch(cpu_run):
    proc, row = cpu_run["proc"], cpu_run["rows"].get("einops")
    assert row, proc.stdout + proc.stderr
    assert (row["built"], row["imported"], row["result"]) == ("rattler-build wheel", "yes", "passed"), row
    assert row["passed"] >= 50 and row["failed"] == 0, row
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("downstream: 2 dependents, 2 passed")


def _broken_sdist(folder: Path) -> Path:
    """A C++ extension whose source does not compile."""
    src = folder / "broken_ext-0.1"
    src.mkdir(parents=True)
    # no torch header: g++ reaches the error at once instead of after half a minute of torch/extension.h
    (src / "broken.cpp").write_text("// built by torch's BuildExtension all the same\nint f() { return undeclared_name; }\n")
    (src / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CppExtension\n"
        "setup(name='broken-ext', version='0.1', ext_modules=[CppExtension('broken_ext', ['broken.cpp'])],\n"
        "      cmdclass={'build_ext': BuildExtension})\n")
    tarball = folder / "broken_ext-0.1.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(src, arcname=src.name)
    return tarball


def test_a_dependent_whose_build_fails_is_a_failed_row_with_its_first_error(wheelbuild, realbuild_toolchain, tmp_path):
    tarball = _broken_sdist(tmp_path / "src")
    (tmp_path / "dependents").mkdir()
    (tmp_path / "dependents" / "test_broken.py").write_text("def test_nothing():\n    pass\n")
    catalog = tmp_path / "dependents.yaml"
    catalog.write_text(json.dumps({"dependents": [{
        "name": "broken-ext", "version": "0.1", "kind": "conda-sdist", "flavour": "cpu", "torch": "2.13.*",
        "source": {"url": tarball.as_uri(), "sha256": hashlib.sha256(tarball.read_bytes()).hexdigest()},
        "imports": ["broken_ext"], "tests": {"files": ["test_broken.py"]}}]}))
    variant = realbuild_toolchain["variant"]((WHEEL_PYTHON,), tmp_path / "cpu-py311.yaml")
    proc, rows = downstream(tmp_path / "run", "--catalog", str(catalog), "--channel", str(wheelbuild["build"].output_dir),
                            "--with-channel", str(realbuild_toolchain["toolchain"].channel), "--variant", str(variant),
                            "--cache", str(tmp_path / "cache"))
    assert proc.returncode == 1
    row = rows["broken-ext"]
    assert (row["result"], row["imported"]) == ("failed", "-"), row
    assert "broken.cpp:2:" in row["note"] and "error:" in row["note"] and "undeclared_name" in row["note"], row
    assert f"error: broken-ext: {row['note']}" in proc.stderr.splitlines()
    assert table_rows(proc.stdout)["broken-ext"][-1] == "failed"
    assert f"  broken-ext: {row['note']}" in proc.stdout


def test_a_wheel_wanting_another_torch_is_refused_and_the_prefix_untouched(gpu_run, cudawheel, tmp_path,
                                                                             tmp_path_factory):
    """torchvision 0.28.0 pins torch==2.13.0: pip would put a second torch over ours. The plan
    is read first, nothing is installed, the row fails with what pip wanted."""
    (tmp_path / "dependents").mkdir()
    (tmp_path / "dependents" / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    catalog = tmp_path / "dependents.yaml"
    catalog.write_text(json.dumps({"dependents": [{
        "name": "torchvision", "version": "0.28.0", "kind": "pip-wheel", "flavour": "gpu", "torch": "2.14.*",
        "imports": ["torchvision"], "tests": {"files": ["test_nothing.py"]}}]}))
    site = gpu_run["prefix"] / f"lib/python{WHEEL_PYTHON}/site-packages"
    before = sorted(p.name for p in site.iterdir())
    extra = [arg for channel in cudawheel["channels"][1:] for arg in ("--with-channel", str(channel))]
    proc, rows = downstream(tmp_path / "run", "--catalog", str(catalog), "--channel", str(cudawheel["build"].output_dir),
                            *extra, "--env", f"gpu={gpu_run['prefix']}",
                            "--cache", str(run_downstream_cache(tmp_path_factory)))
    assert proc.returncode == 1
    row = rows["torchvision"]
    assert row["result"] == "failed" and row["note"].startswith("pip would install torch 2.13.0"), row
    assert row["note"].endswith("nothing installed")
    assert sorted(p.name for p in site.iterdir()) == before
