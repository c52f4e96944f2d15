"""``python -m feedstock deps``: the vendored-dependency table from a real git checkout with
submodules, the release tarball packed from it, the real torch 2.13.0 wheel and a repodata.json."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.paths import REPO_ROOT
from tests.support.pytorch_source import build_checkout, copy_tree, pack


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, torch_wheel) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git not on PATH: the source tree is a real git repository with submodules")
    return build_checkout(tmp_path_factory.mktemp("deps-src"), torch_wheel)


@pytest.fixture(scope="module")
def plain_tree(checkout, tmp_path_factory) -> Path:
    """The checkout's files without git metadata: an unpacked release tarball."""
    return copy_tree(checkout, tmp_path_factory.mktemp("plain") / "pytorch-v9.9.9")


@pytest.fixture(scope="module")
def tarball(plain_tree, tmp_path_factory) -> Path:
    return pack(plain_tree, "pytorch-v9.9.9", tmp_path_factory.mktemp("tar") / "pytorch-v9.9.9.tar.gz")


def repodata(path: Path) -> Path:
    """A channel subdir's repodata.json: versions chosen so that string sorting would be wrong."""
    def record(name: str, version: str, build: str = "h0_0") -> dict:
        return {"name": name, "version": version, "build": build, "build_number": 0, "depends": [],
                "subdir": "linux-64"}

    data = {"info": {"subdir": "linux-64"},
            "packages": {"sympy-1.9-h0_0.tar.bz2": record("sympy", "1.9"),
                         "sympy-1.14.0-h0_0.tar.bz2": record("sympy", "1.14.0"),
                         "triton-3.10.0-h0_0.tar.bz2": record("triton", "3.10.0")},
            "packages.conda": {"sympy-1.13.3-h0_0.conda": record("sympy", "1.13.3"),
                               "triton-3.7.1-h0_0.conda": record("triton", "3.7.1"),
                               "triton-3.9.0rc1-h0_0.conda": record("triton", "3.9.0rc1"),
                               "libprotobuf-6.31.1-h0_0.conda": record("libprotobuf", "6.31.1"),
                               "libprotobuf-7.35.1-h0_0.conda": record("libprotobuf", "7.35.1")}}
    path.write_text(json.dumps(data))
    return path


def rows_of(proc) -> dict[str, dict]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {row["package"]: row for row in json.loads(proc.stdout)}


def cells(row: dict) -> tuple:
    return row["upstream"], row["recipe"], row["flagged"]


@pytest.mark.download
def test_git_checkout_rows(checkout, tmp_path):
    rows = rows_of(run_feedstock_cli("deps", "--source", str(checkout), "--repodata", str(repodata(tmp_path / "r.json")),
                                     "--format", "json"))
    assert {p: cells(r) for p, r in rows.items()} == {
        # git describe --tags of each submodule, the nested one included (--recursive)
        "fmt": ("11.2.0", "", False),
        "nccl": ("2.27.5", "2", False),
        "libprotobuf": ("3.13.0", "7.35.1", True),        # no tag: the version header
        "gtest": ("1.11.0", "", False),
        "sleef": ("3.8", "", False),
        # .ci/docker scripts and the triton pin file
        "cuda-version": ("12.6.3, 12.8.1, 13.0.0", "12.9, 13.0", True),
        "libmagma": ("2.6.1", "2.10.0", True),
        "mkl": ("2024.2.0", "2026", True),
        "triton": ("3.8.0", "3.8.0", False),
    }
    assert rows["fmt"]["source"].startswith("git describe --tags: 11.2.0 (third_party/fmt)")
    assert rows["sleef"]["source"].startswith("git describe --tags: 3.8-2-g")
    assert rows["gtest"]["source"].startswith("git describe --tags: release-1.11.0 "
                                              "(third_party/protobuf/third_party/googletest)")
    assert rows["libprotobuf"]["source"].startswith("third_party/protobuf/src/google/protobuf/stubs/common.h (commit ")
    assert rows["cuda-version"]["source"] == ("CUDA_VERSION in .ci/docker/common/install_cuda.sh; "
                                              "pin: recipe/conda_build_config.yaml")
    # newest in the channel by conda's ordering: 3.10.0 > 3.9.0rc1 > 3.7.1, 7.35.1 > 6.31.1
    assert rows["triton"]["channel"] == "3.10.0"
    assert rows["libprotobuf"]["channel"] == "7.35.1"


@pytest.mark.parametrize("kind", ["tarball", "plain_tree"])
def test_release_tarball_rows_come_from_version_files(kind, request):
    source = request.getfixturevalue(kind)
    rows = rows_of(run_feedstock_cli("deps", "--source", str(source), "--format", "json"))
    assert {p: (r["upstream"], r["source"].split(";")[0]) for p, r in rows.items()
            if p in ("fmt", "nccl", "libprotobuf", "sleef")} == {
        "fmt": ("11.2.0", "third_party/fmt/include/fmt/base.h"),
        "nccl": ("2.27.5", "third_party/nccl/makefiles/version.mk"),
        "libprotobuf": ("3.13.0", "third_party/protobuf/src/google/protobuf/stubs/common.h"),
        "sleef": ("3.8.0", "third_party/sleef/CMakeLists.txt"),
    }
    assert "gtest" not in rows   # nested submodules are not in the top .gitmodules
    assert cells(rows["mkl"]) == ("2024.2.0", "2026", True)


@pytest.mark.download
def test_wheel_requirements_with_bounds(torch_wheel, tmp_path):
    """Acceptance: the real wheel's Requires-Dist, conda names, lower bounds; our pins beside them."""
    rows = rows_of(run_feedstock_cli("deps", "--wheel", str(torch_wheel), "--format", "json",
                                     "--repodata", str(repodata(tmp_path / "r.json"))))
    assert {p: cells(r) for p, r in rows.items()} == {
        "filelock": ("(any)", "(any)", False),
        "typing_extensions": (">=4.10.0", ">=4.10.0", False),
        "setuptools": (">=77.0.3", ">=77.0.3", False),
        "sympy": (">=1.13.3", ">=1.13.3", False),
        "networkx": (">=2.5.1", ">=2.5.1", False),
        "jinja2": ("(any)", "(any)", False),
        "fsspec": (">=0.8.5", ">=0.8.5", False),
        "python": (">=3.10", "3.10.*, 3.11.*, 3.12.*, 3.13.*, 3.14.*", False),
    }
    assert rows["sympy"]["channel"] == "1.14.0"     # not "1.9", which sorts last as a string
    assert rows["sympy"]["source"] == "torch 2.13.0+cpu METADATA Requires-Dist; pin: recipe/meta.yaml"


@pytest.mark.download
def test_recipe_below_wheel_bound_is_flagged(torch_wheel, feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    meta.write_text(meta.read_text().replace("- sympy >=1.13.3", "- sympy >=1.10"))
    rows = rows_of(run_feedstock_cli("deps", "--wheel", str(torch_wheel), "--format", "json", root=feedstock_copy))
    assert cells(rows["sympy"]) == (">=1.13.3", ">=1.10", True)
    proc = run_feedstock_cli("deps", "--wheel", str(torch_wheel), root=feedstock_copy)
    assert "| sympy (major.minor differs) | >=1.13.3 | >=1.10 | - |" in proc.stdout
    assert "deps: major.minor differs for sympy" in proc.stderr


@pytest.mark.download
def test_write_docs_replaces_only_the_table(torch_wheel, feedstock_copy):
    page = feedstock_copy / "docs" / "maintaining.md"
    page.parent.mkdir()
    before, after = "# Maintaining\n\nIntro.\n\n<!-- deps-table:start -->\n", "<!-- deps-table:end -->\n\nMore.\n"
    page.write_text(before + "| stale | table |\n" + after)
    proc = run_feedstock_cli("deps", "--wheel", str(torch_wheel), "--write-docs", root=feedstock_copy)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "deps: docs/maintaining.md table updated (8 rows)"
    text = page.read_text()
    assert text.startswith(before) and text.endswith(after)
    table = text[len(before):-len(after)]
    assert table.splitlines()[0] == "| package | upstream | recipe | channel | source |"
    assert "| fsspec | >=0.8.5 | >=0.8.5 | - | torch 2.13.0+cpu METADATA Requires-Dist; pin: recipe/meta.yaml |" in table
    again = run_feedstock_cli("deps", "--wheel", str(torch_wheel), "--write-docs", root=feedstock_copy)
    assert again.stdout.strip() == "deps: docs/maintaining.md table already current (8 rows)"
    assert page.read_text() == text


@pytest.mark.download
def test_write_readme_is_a_hidden_alias_of_write_docs(torch_wheel, feedstock_copy):
    """The old spelling still writes the docs page (README.md is left alone) but is not advertised."""
    page = feedstock_copy / "docs" / "maintaining.md"
    page.parent.mkdir()
    page.write_text("<!-- deps-table:start -->\n<!-- deps-table:end -->\n")
    readme = feedstock_copy / "README.md"
    readme.write_text("# Feedstock\n")
    proc = run_feedstock_cli("deps", "--wheel", str(torch_wheel), "--write-readme", root=feedstock_copy)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "deps: docs/maintaining.md table updated (8 rows)"
    assert "| sympy | >=1.13.3 | >=1.13.3 |" in page.read_text()
    assert readme.read_text() == "# Feedstock\n"
    usage = run_feedstock_cli("deps", "--help")
    assert "--write-docs" in usage.stdout and "--write-readme" not in usage.stdout


@pytest.mark.download
def test_committed_docs_table_is_current(torch_wheel):
    """docs/maintaining.md's table is the one `deps --wheel` writes (regenerate it with
    `python -m feedstock deps --wheel <torch 2.13.0 wheel> --write-docs` when this fails)."""
    proc = run_feedstock_cli("deps", "--wheel", str(torch_wheel))
    assert proc.returncode == 0, proc.stderr
    text = (REPO_ROOT / "docs" / "maintaining.md").read_text()
    start = text.index("<!-- deps-table:start -->\n") + len("<!-- deps-table:start -->\n")
    assert text[start:text.index("<!-- deps-table:end -->")] == proc.stdout


@pytest.mark.parametrize("args, message", [
    ((), "error: deps needs --source DIR|TARBALL or --wheel WHEEL (or both)"),
    (("--source", "/nonexistent/src"), "error: source /nonexistent/src does not exist; pass a PyTorch checkout "
                                        "or release tarball"),
    (("--wheel", "/nonexistent/torch.whl"), "error: wheel /nonexistent/torch.whl does not exist; pass a torch-*.whl file"),
])
def test_bad_input(args, message):
    proc = run_feedstock_cli("deps", *args)
    assert proc.returncode == 2
    assert proc.stderr.strip() == message
    assert proc.stdout == ""


@pytest.mark.download
def test_bad_repodata_and_docs_without_markers(torch_wheel, feedstock_copy, tmp_path):
    broken = tmp_path / "repodata.json"
    broken.write_text("{not json")
    proc = run_feedstock_cli("deps", "--wheel", str(torch_wheel), "--repodata", str(broken), root=feedstock_copy)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: {broken}:1: not valid JSON (Expecting property name enclosed in double "
                                   "quotes); rewrite or re-index the file")
    not_wheel = tmp_path / "torch.whl"
    not_wheel.write_text("text")
    proc = run_feedstock_cli("deps", "--wheel", str(not_wheel), root=feedstock_copy)
    assert proc.stderr.strip() == f"error: {not_wheel} is not a wheel (not a zip file); pass a torch-*.whl file"
    page = feedstock_copy / "docs" / "maintaining.md"
    proc = run_feedstock_cli("deps", "--wheel", str(torch_wheel), "--write-docs", root=feedstock_copy)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {page} does not exist; run from the feedstock root"
    page.parent.mkdir()
    page.write_text("# no markers\n")
    proc = run_feedstock_cli("deps", "--wheel", str(torch_wheel), "--write-docs", root=feedstock_copy)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: docs/maintaining.md has no <!-- deps-table:start --> ... "
                                   "<!-- deps-table:end --> markers; add them where the table goes")
    assert page.read_text() == "# no markers\n"


def test_cuda_wheel_metadata_maps_to_conda(tmp_path):
    """A CUDA wheel's METADATA (as PyPI's Linux CUDA wheels spell it): CUDA wheels and triton are
    not run requirements, triton's pin is read, a Python-version marker does not drop a requirement."""
    from feedstock.before_build.maintain.wheel_metadata import parse_metadata

    metadata = parse_metadata(
        "Metadata-Version: 2.4\nName: torch\nVersion: 2.13.0\nRequires-Python: >=3.10\n"
        "Classifier: Programming Language :: Python :: 3.14\n"
        "Requires-Dist: filelock\n"
        "Requires-Dist: typing-extensions>=4.10.0\n"
        'Requires-Dist: setuptools; python_version >= "3.12"\n'
        'Requires-Dist: nvidia-cuda-nvrtc-cu12==12.9.86; platform_system == "Linux"\n'
        'Requires-Dist: triton==3.7.1; platform_system == "Linux"\n'
        'Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"\n', source="test")
    assert [r.conda_spec for r in metadata.runtime_requirements()] == [
        "filelock", "typing_extensions >=4.10.0", "setuptools"]
    assert metadata.triton_version() == "3.7.1"
    assert (metadata.min_python(), metadata.classifier_pythons) == ("3.10", ("3.14",))
