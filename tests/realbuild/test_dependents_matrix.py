"""`python -m feedstock downstream --compare 2.13.0 2.14.1` for real (issue 28): the dependents
against the session's two pytorch builds, pytorch-cpu 2.13.0 and pytorch-gpu 2.14.1 (CUDA 13.0),
from the real wheels (tests/conftest.py: `wheelbuild`, `cudawheel`; nothing is built twice).

The suite runs a real but smaller matrix: every dependent but torch-cluster (2 x 2 sdist
compiles of 16 translation units, ~10 min each on 2 cores: `benchmarks/bench_downstream.py
--matrix` runs the full one). Its cells:

| dependent     | 2.13.0 cpu                    | 2.14.1 gpu                                     |
| torchvision   | n/a (a gpu wheel)             | works (pip into the pytorch-gpu prefix)         |
| torchaudio    | n/a (a gpu wheel)             | needs release (2.11.0 pairs with 2.11 only)     |
| torch-scatter | works (the package test_dependents.py built: the cache, no compile) | rebuilt (the one compile) |
| einops        | works                         | works (the same noarch package)                 |
| opt-einsum    | works                         | works                                           |
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
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

NAMES = ("torchvision", "torchaudio", "torch-scatter", "einops", "opt-einsum")


@pytest.fixture(scope="module")
def matrix(request: pytest.FixtureRequest, wheelbuild: dict, cudawheel: dict, realbuild_toolchain: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = module_scratch(request, tmp_path_factory, "downstream-matrix")
    # the same variant file as test_dependents.py's: torch-scatter's 2.13.0 package has the same inputs there
    variant = realbuild_toolchain["variant"]((WHEEL_PYTHON,), work / "cpu-py311.yaml")
    summary = work / "summary.md"
    summary.write_text("# bump 2.13.0 -> 2.14.1\n")
    extra = [arg for channel in cudawheel["channels"][1:] for arg in ("--with-channel", str(channel))]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [sys.executable, "-m", "feedstock", "--feedstock-root", str(REPO_ROOT), "downstream", *NAMES,
         "--compare", "2.13.0", "2.14.1",
         "--channel", str(wheelbuild["build"].output_dir), "--channel", str(cudawheel["build"].output_dir),
         *extra, "--variant", str(variant), "--env", f"gpu={cudawheel['prefix']}",
         # the NVIDIA packages are unpacked there already (same session, same files)
         "--pkgs-dir", str(cudawheel["work"] / "pkgs"),
         # the run's cache: torch-scatter's 2.13.0 package test_dependents.py built, when it ran first
         "--cache", str(run_downstream_cache(tmp_path_factory)),
         "--work", str(work / "work"), "--json", str(work / "matrix.json"), "--summary", str(summary)],
        cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=3600)
    data = json.loads((work / "matrix.json").read_text()) if (work / "matrix.json").is_file() else {}
    print(proc.stdout)  # the table, for the record (pytest -s)
    return {"proc": proc, "data": data, "work": work / "work", "summary": summary}


def cells(matrix: dict, name: str) -> dict[str, dict]:
    [row] = [d for d in matrix["data"]["dependents"] if d["name"] == name]
    return row["cells"]


def test_columns_are_the_two_builds_of_the_session(matrix, wheelbuild, cudawheel):
    proc, data = matrix["proc"], matrix["data"]
    assert data, proc.stdout + proc.stderr
    assert [(c["label"], c["python"]) for c in data["columns"]] == [("2.13.0 cpu", "3.11"), ("2.14.1 gpu", "3.11")]
    assert data["columns"][1]["build"].startswith("cuda130_generic_py311")
    assert [d["name"] for d in data["dependents"]] == list(NAMES)


def test_one_cell_of_each_kind_and_no_regression(matrix):
    proc, data = matrix["proc"], matrix["data"]
    kinds = {d["name"]: [c["kind"] for c in d["cells"].values()] for d in data["dependents"]}
    assert kinds == {"torchvision": ["n/a", "works"], "torchaudio": ["n/a", "needs release"],
                     "torch-scatter": ["works", "rebuilt"], "einops": ["works", "works"],
                     "opt-einsum": ["works", "works"]}, proc.stdout + proc.stderr[-3000:]
    assert data["counts"] == {"works": 6, "rebuilt": 1, "needs release": 1, "fails": 0, "n/a": 2}
    assert data["regressions"] == [] and proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.rstrip().splitlines()[-1] == ("downstream matrix: 5 dependents x 2 pytorch builds; "
                                                     "6 works, 1 rebuilt, 1 needs release, 0 fails, 2 n/a")


def test_every_cell_but_works_says_why(matrix):
    audio = cells(matrix, "torchaudio")["2.14.1 gpu"]
    assert audio["reason"] == ("torchaudio 2.11.0 pairs with pytorch 2.11.* (its entry's torch); "
                               "no release of it for 2.14.1 is known")
    assert cells(matrix, "torchvision")["2.13.0 cpu"]["reason"] == "a gpu dependent; this build is cpu"
    scatter = cells(matrix, "torch-scatter")["2.14.1 gpu"]["reason"]
    assert scatter.startswith("its package for 2.13.0 needs ") and "libtorch >=2.13.0,<2.14.0a0" in scatter, scatter
    assert scatter.endswith("; rebuilt against 2.14.1")
    for line in (f"  torchaudio 2.11.0 on 2.14.1 gpu: needs release: {audio['reason']}",
                 f"  torch-scatter 2.1.2 on 2.14.1 gpu: rebuilt: {scatter}"):
        assert line in matrix["proc"].stdout.splitlines()


def test_tests_ran_in_every_cell_that_works(matrix):
    for row in matrix["data"]["dependents"]:
        for label, cell in row["cells"].items():
            if cell["kind"] in ("works", "rebuilt"):
                assert cell["passed"] > 0 and cell["failed"] == 0, (row["name"], label, cell)
    # with torch importable, opt-einsum's torch-backend tests run instead of skipping (43 pass without it)
    assert all(c["passed"] > 43 for c in cells(matrix, "opt-einsum").values())
    assert cells(matrix, "torch-scatter")["2.14.1 gpu"]["passed"] >= 10
    # the rebuild compiled: each translation unit through the compiler (ccache its launcher)
    assert downstream_compiles(matrix["proc"].stderr, "torch-scatter") >= 4, matrix["proc"].stderr[-3000:]


def test_the_rebuild_is_pinned_to_the_new_minor(matrix):
    from rattler_build import Package

    [package] = matrix["work"].glob("matrix/torch-scatter/2.14.1_gpu/build/output/linux-64/torch-scatter-2.1.2-pt214py311_*.conda")
    depends = [str(d) for d in Package.from_file(package).depends]
    assert "libtorch >=2.14.1,<2.15.0a0" in depends and "pytorch >=2.14.1,<2.15.0a0" in depends, depends
    env = matrix["work"] / "envs" / "torch-scatter-2.14.1_gpu"
    assert list((env / "conda-meta").glob("torch-scatter-2.1.2-pt214py311_*.json"))
    assert list((env / "conda-meta").glob("pytorch-2.14.1-cuda130_*.json"))


def test_the_summary_is_appended_as_markdown(matrix):
    text = matrix["summary"].read_text()
    assert text.startswith("# bump 2.13.0 -> 2.14.1\n### Downstream: pytorch 2.13.0 -> 2.14.1\n")
    assert "| torch-scatter 2.1.2 | works | rebuilt |" in text
    assert "No dependent that works on 2.13.0 is broken on 2.14.1." in text
