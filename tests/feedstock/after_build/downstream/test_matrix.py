"""`downstream --matrix` / `--compare` without real packages: the columns, the cell kinds and
their reasons, the exit rule, the table, the JSON, the Markdown summary, and the bad input that
is refused before anything builds (a channel of metadata-only packages stands in for ours)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from feedstock.dependents_catalog import load_catalog, version_spec_problem
from feedstock.after_build.downstream.channel import TorchBuild
from feedstock.after_build.downstream.conda_package import cache_key, recipe_for, torch_tag
from feedstock.after_build.downstream.matrix import (Cell, Matrix, MatrixRow, columns_of, not_applicable,
                                                     old_and_new, regressions)
from feedstock.after_build.downstream.matrix_run import widened
from feedstock.after_build.downstream.matrix_table import format_markdown, format_matrix, matrix_json, summary_line
from feedstock.errors import FeedstockError
from tests.support.fake_conda_package import write_metadata_package
from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.paths import REPO_ROOT

pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

CPU_213 = TorchBuild("2.13.0", "cpu_generic_py311_h1111111_0", "cpu", "3.11", "a" * 64)
CPU_213_PY312 = TorchBuild("2.13.0", "cpu_generic_py312_h1111111_0", "cpu", "3.12", "b" * 64)
GPU_2141 = TorchBuild("2.14.1", "cuda130_generic_py311_h2222222_200", "gpu", "3.11", "c" * 64)
CPU_2141 = TorchBuild("2.14.1", "cpu_generic_py311_h3333333_0", "cpu", "3.11", "d" * 64)
CPU_2100 = TorchBuild("2.10.0", "cpu_generic_py311_h4444444_0", "cpu", "3.11", "e" * 64)


def test_one_column_per_version_and_flavour_oldest_first_lowest_python():
    columns = columns_of([GPU_2141, CPU_213_PY312, CPU_2141, CPU_213, CPU_2100])
    assert [c.label for c in columns] == ["2.10.0 cpu", "2.13.0 cpu", "2.14.1 cpu", "2.14.1 gpu"]
    assert columns[1].build == CPU_213  # py311 before py312
    assert [c.label for c in columns_of([GPU_2141, CPU_213, CPU_2100], ["2.13.0", "2.14.1"])] == \
        ["2.13.0 cpu", "2.14.1 gpu"]
    assert old_and_new(columns) == ("2.10.0", "2.14.1")  # 2.10 is older than 2.9 would be: versions, not text


def test_a_flavour_that_does_not_apply_is_na_with_its_reason():
    gpu, cpu = columns_of([GPU_2141, CPU_213])[::-1]
    assert not_applicable("any", gpu) is None and not_applicable("gpu", gpu) is None
    cell = not_applicable("gpu", cpu)
    assert (cell.kind, cell.reason) == ("n/a", "a gpu dependent; this build is cpu")


def _matrix(*cells_by_name: tuple[str, list[str]]) -> Matrix:
    columns = columns_of([CPU_213, GPU_2141])
    matrix = Matrix(columns, old="2.13.0", new="2.14.1")
    for name, kinds in cells_by_name:
        matrix.rows.append(MatrixRow(name, "1.0", "pip wheel",
                                     [Cell(k, "" if k == "works" else f"why {k}") for k in kinds]))
    return matrix


@pytest.mark.parametrize("old, new, broken", [
    ("works", "works", False), ("works", "rebuilt", False), ("works", "n/a", False),
    ("works", "fails", True), ("works", "needs release", True),
    ("needs release", "fails", False), ("fails", "needs release", False), ("n/a", "fails", False),
])
def test_the_exit_rule_is_works_on_old_and_not_works_or_rebuilt_on_new(old, new, broken):
    found = regressions(_matrix(("dep", [old, new])))
    assert bool(found) == broken
    if broken:
        assert found == [f"dep 1.0: works on 2.13.0, {new} on 2.14.1 gpu: why {new}"]


def test_the_table_has_a_column_per_build_and_a_reason_per_cell_that_is_not_works():
    matrix = _matrix(("torchvision", ["n/a", "works"]), ("torch-scatter", ["works", "rebuilt"]),
                     ("einops", ["works", "fails"]))
    lines = format_matrix(matrix).splitlines()
    assert lines[0].split("|")[1:-1] == [" dependent         ", " 2.13.0 cpu ", " 2.14.1 gpu "]
    assert [c.strip() for c in lines[3].split("|")[1:-1]] == ["torch-scatter 1.0", "works", "rebuilt"]
    assert "  torchvision 1.0 on 2.13.0 cpu: n/a: why n/a" in lines
    assert "  torch-scatter 1.0 on 2.14.1 gpu: rebuilt: why rebuilt" in lines
    assert not any("on 2.14.1 gpu: works" in line for line in lines)
    assert lines[-1] == "regression: einops 1.0: works on 2.13.0, fails on 2.14.1 gpu: why fails"
    assert summary_line(matrix) == ("downstream matrix: 3 dependents x 2 pytorch builds; 3 works, 1 rebuilt, "
                                    "0 needs release, 1 fails, 1 n/a")


def test_the_json_is_what_a_ci_job_reads():
    data = json.loads(json.dumps(matrix_json(_matrix(("einops", ["works", "fails"])))))
    assert [c["label"] for c in data["columns"]] == ["2.13.0 cpu", "2.14.1 gpu"]
    assert data["columns"][1]["build"] == GPU_2141.build
    cell = data["dependents"][0]["cells"]["2.14.1 gpu"]
    assert (cell["kind"], cell["reason"]) == ("fails", "why fails")
    assert data["counts"] == {"works": 1, "rebuilt": 0, "needs release": 0, "fails": 1, "n/a": 0}
    assert (data["old"], data["new"]) == ("2.13.0", "2.14.1") and len(data["regressions"]) == 1


def test_the_markdown_summary_says_whether_the_bump_breaks_anything():
    text = format_markdown(_matrix(("einops", ["works", "works"])), "Downstream: pytorch 2.13.0 -> 2.14.1")
    assert text.startswith("### Downstream: pytorch 2.13.0 -> 2.14.1\n\n| dependent | 2.13.0 cpu | 2.14.1 gpu |")
    assert "| einops 1.0 | works | works |" in text
    assert "No dependent that works on 2.13.0 is broken on 2.14.1." in text
    broken = format_markdown(_matrix(("einops", ["works", "fails"])), "t")
    assert "- **regression**: einops 1.0: works on 2.13.0, fails on 2.14.1 gpu: why fails" in broken


def test_a_conda_wheel_carries_its_torch_spec_as_a_run_constraint_and_a_rebuild_widens_it(tmp_path):
    einops = next(d for d in load_catalog(REPO_ROOT / "recipe" / "dependents.yaml") if d.name == "einops")
    wheel = tmp_path / "einops-0.8.2-py3-none-any.whl"
    import zipfile
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("einops-0.8.2.dist-info/METADATA", "Name: einops\nRequires-Dist: torch (>=2.0)\n")
    recipe = recipe_for(einops, CPU_213, wheel, [])
    assert recipe["requirements"]["run_constraints"] == ["pytorch >=2.0,<2.15"]
    assert "pytorch >=2.0" in recipe["requirements"]["run"]  # torch is pytorch in a conda channel
    later = TorchBuild("2.15.0", "cpu_generic_py311_h5_0", "cpu", "3.11")
    rebuilt = recipe_for(widened(einops, later), later, wheel, [])
    assert rebuilt["requirements"]["run_constraints"] == ["pytorch >=2.0,<2.15|2.15.*"]
    assert rebuilt["build"]["number"] == 1  # another file than the first build


def test_an_sdist_build_string_names_the_torch_it_was_built_against(tmp_path):
    scatter = next(d for d in load_catalog(REPO_ROOT / "recipe" / "dependents.yaml") if d.name == "torch-scatter")
    assert torch_tag(GPU_2141) == "pt214"
    string = recipe_for(scatter, GPU_2141, tmp_path / "x.tar.gz", [])["build"]["string"]
    assert string.startswith("pt214py311_h")


def test_the_package_cache_key_follows_the_pytorch_file(tmp_path):
    variant = tmp_path / "v.yaml"
    variant.write_text("c_compiler: [gcc]\n")
    key = cache_key("{}", [], CPU_213, variant)
    assert key == cache_key("{}", [], CPU_213, variant) and len(key) == 24
    assert key != cache_key("{}", [], TorchBuild(*[getattr(CPU_213, f) for f in ("version", "build", "flavour", "python")],
                                                 "f" * 64), variant)
    assert key != cache_key('{"a": 1}', [], CPU_213, variant)
    assert cache_key("{}", [], TorchBuild("2.13.0", "b", "cpu", "3.11"), variant) == ""  # no sha256: no cache


@pytest.mark.parametrize("spec, fine", [("2.14.*", True), (">=2.0,<2.15", True), (">=2.0,<2.15|2.15.*", True),
                                        ("banana", False), ("torch>=2.0", False), (">=2.0,<", False)])
def test_a_torch_spec_must_be_a_version_spec(spec, fine):
    assert (version_spec_problem(spec) == "") == fine


def test_an_entry_whose_torch_is_not_a_version_spec_is_one_line(tmp_path):
    catalog = tmp_path / "dependents.yaml"
    catalog.write_text("dependents:\n  - {name: x, version: '1', kind: pip-wheel, flavour: cpu, "
                       "torch: 'torch>=2.0', tests: {files: [a.py]}}\n")
    with pytest.raises(FeedstockError, match="dependent 'x': torch 'torch>=2.0' is not a version spec") as err:
        load_catalog(catalog)
    assert err.value.exit_code == 2 and "\n" not in str(err.value)


@pytest.fixture
def one_pytorch_channel(tmp_path) -> Path:
    channel = tmp_path / "channel"
    write_metadata_package(channel, "pytorch", "2.13.0", CPU_213.build)
    return channel


def test_compare_with_a_channel_of_one_pytorch_is_one_line_and_writes_nothing(tmp_path, one_pytorch_channel):
    summary = tmp_path / "summary.md"
    summary.write_text("# before\n")
    proc = run_feedstock_cli("downstream", "--channel", str(one_pytorch_channel), "--work", str(tmp_path / "w"),
                             "--compare", "2.13.0", "2.14.1", "--summary", str(summary),
                             "--json", str(tmp_path / "m.json"))
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.splitlines() == ["error: --compare 2.13.0 2.14.1: the channels hold pytorch 2.13.0 only; "
                                        "build 2.14.1 into a channel and pass it with --channel"]
    assert summary.read_text() == "# before\n" and not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("args, line", [
    (("--compare", "2.13.0", "2.13.0"), "--compare 2.13.0 2.13.0: give two different versions, the old one first"),
    (("--compare", "2.13.0", ">=2.14"), "--compare 2.13.0 >=2.14: '>=2.14' is not a pytorch version (e.g. 2.14.1)"),
    (("--summary", "s.md"), "--summary needs --matrix or --compare"),
])
def test_bad_matrix_options_are_one_line(tmp_path, one_pytorch_channel, args, line):
    proc = run_feedstock_cli("downstream", "--channel", str(one_pytorch_channel), *args)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [f"error: {line}"]


def test_a_source_whose_sha256_does_not_match_is_one_line_before_anything_builds(tmp_path, one_pytorch_channel):
    wheel = tmp_path / "tiny-1.0-py3-none-any.whl"
    wheel.write_bytes(b"not the catalog's file")
    catalog = tmp_path / "dependents.yaml"
    catalog.write_text(json.dumps({"dependents": [{
        "name": "tiny", "version": "1.0", "kind": "conda-wheel", "flavour": "any", "torch": ">=2.0,<3",
        "source": {"url": wheel.as_uri(), "sha256": "0" * 64}, "imports": ["tiny"], "tests": {"pyargs": ["tiny"]}}]}))
    for mode in (("--matrix",), ()):
        proc = run_feedstock_cli("downstream", "--catalog", str(catalog), "--channel", str(one_pytorch_channel),
                                 "--cache", str(tmp_path / "cache"), "--work", str(tmp_path / "w"), *mode)
        assert proc.returncode == 2, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert errors == [f"error: {wheel.name}: sha256 {__import__('hashlib').sha256(wheel.read_bytes()).hexdigest()[:12]}... "
                          f"is not the catalog's 000000000000...; fix {catalog}"], proc.stderr
        assert "Traceback" not in proc.stderr
        assert not list((tmp_path / "cache").rglob("*.whl")) and not list((tmp_path / "w").rglob("output"))
    assert wheel.read_bytes() == b"not the catalog's file"


# --- how a conda kind's cell is decided (the builds and installs stubbed; the real ones run in
# tests/realbuild/test_dependents_matrix.py) ---------------------------------------------------

class StubRunner:
    """Builds succeed or fail per pytorch version; an install fails where the package's torch
    x.y is not the environment's (what libtorch's run_exports do); tests pass unless told."""

    def __init__(self, work: Path, failing_builds=(), failing_tests=()):
        from types import SimpleNamespace

        self.options = SimpleNamespace(work=work)
        self.failing_builds, self.failing_tests, self.built = failing_builds, failing_tests, []

    def package(self, dependent, build, folder):
        from feedstock.after_build.downstream.conda_package import BuildFailed

        self.built.append(build.version)
        if build.version in self.failing_builds:
            raise BuildFailed(f"x.cpp:1:1: error: no member against {build.version}")
        return Path(f"pkg-for-{build.version}")

    def package_env(self, dependent, build, package, key):
        if dependent.kind == "conda-sdist" and package.name != f"pkg-for-{build.version}":
            raise FeedstockError("cannot solve torch-scatter ==2.1.2, pytorch ==...")
        return Path("python")

    def import_and_test(self, dependent, python, cwd):
        from feedstock.after_build.downstream.testrun import TestCounts

        if dependent.name in self.failing_tests:
            return "", TestCounts(passed=3, failed=1, first_failure="test_x: AssertionError")
        return "", TestCounts(passed=5)


@pytest.mark.parametrize("failing_builds, failing_tests, kinds, reason", [
    ((), (), ["works", "rebuilt"], "its package for 2.13.0 needs libtorch >=2.13.0,<2.14.0a0; rebuilt against 2.14.1"),
    (("2.14.1",), (), ["works", "needs release"],
     "its package for 2.13.0 needs libtorch >=2.13.0,<2.14.0a0; the rebuild against 2.14.1 fails: "
     "x.cpp:1:1: error: no member against 2.14.1"),
    ((), ("torch-scatter",), ["fails", "fails"], "its package for 2.13.0 needs libtorch >=2.13.0,<2.14.0a0; "
                                                   "rebuilt against 2.14.1; test_x: AssertionError"),
    (("2.13.0",), (), ["needs release", "rebuilt"], None),
])
def test_an_sdist_is_built_once_at_home_then_installed_or_rebuilt(tmp_path, monkeypatch, failing_builds,
                                                                 failing_tests, kinds, reason):
    from feedstock.after_build.downstream import matrix_run

    monkeypatch.setattr(matrix_run, "torch_pins", lambda package: "libtorch >=2.13.0,<2.14.0a0")
    scatter = next(d for d in load_catalog(REPO_ROOT / "recipe" / "dependents.yaml") if d.name == "torch-scatter")
    stub = StubRunner(tmp_path, failing_builds, failing_tests)
    runner = matrix_run.MatrixRunner(stub, columns_of([CPU_213, GPU_2141]))
    cells = [runner.cell(scatter, column) for column in runner.columns]
    assert [c.kind for c in cells] == kinds
    if reason:
        assert cells[1].reason == reason
    assert stub.built == ["2.13.0", "2.14.1"]  # the home build once, the rebuild once


def test_a_wheel_outside_its_pairing_needs_a_release_without_running_pip(tmp_path):
    from feedstock.after_build.downstream import matrix_run

    audio = next(d for d in load_catalog(REPO_ROOT / "recipe" / "dependents.yaml") if d.name == "torchaudio")
    runner = matrix_run.MatrixRunner(StubRunner(tmp_path), columns_of([CPU_213, GPU_2141]))
    cpu, gpu = (runner.cell(audio, column) for column in runner.columns)
    assert (cpu.kind, gpu.kind) == ("n/a", "needs release")
    assert gpu.reason == ("torchaudio 2.11.0 pairs with pytorch 2.11.* (its entry's torch); "
                          "no release of it for 2.14.1 is known")


def test_the_channel_of_the_build_comes_first():
    """Solvers take a package name from the first channel that has it (strict priority): the
    CPU channel ahead would hide the GPU build's libtorch (the real matrix found it so)."""
    from dataclasses import replace

    from feedstock.after_build.downstream.channel import first_for

    cpu, gpu, tools = Path("cpu"), Path("gpu"), Path("tools")
    assert first_for(replace(GPU_2141, channel=gpu), [cpu, gpu, tools]) == [gpu, cpu, tools]
    assert first_for(replace(CPU_213, channel=cpu), [cpu, gpu, tools]) == [cpu, gpu, tools]


def test_a_gpu_build_solves_behind_a_cpu_channel(tmp_path):
    """rattler's real solver and installer on metadata-only packages: a CPU channel with
    libtorch/pytorch 2.13.0 named first, the GPU channel with 2.14.1 second. The environment of
    the GPU build solves because its channel goes first (before the fix: `libtorch
    >=2.14.1,<2.15.0a0 ... no viable options`)."""
    from feedstock.after_build.downstream.channel import indexed_view, torch_builds
    from feedstock.after_build.downstream.run import DownstreamRequest, Runner

    cpu, gpu = tmp_path / "cpu", tmp_path / "gpu"
    write_metadata_package(cpu, "python", "3.11.7", "h0_0")
    write_metadata_package(cpu, "libtorch", "2.13.0", "cpu_generic_h1_0")
    write_metadata_package(cpu, "pytorch", "2.13.0", CPU_213.build, depends=("libtorch 2.13.0", "python 3.11.*"))
    write_metadata_package(gpu, "libtorch", "2.14.1", "cuda130_generic_h2_200")
    write_metadata_package(gpu, "pytorch", "2.14.1", GPU_2141.build, depends=("libtorch >=2.14.1,<2.15.0a0",
                                                                               "python 3.11.*"))
    views = [indexed_view(c, tmp_path / "views") for c in (cpu, gpu)]
    runner = Runner(DownstreamRequest(catalog=tmp_path / "unused.yaml", channels=views, work=tmp_path / "work"))
    [build] = [b for b in torch_builds(views[1]) if b.flavour == "gpu"]
    prefix = runner.environment("gpu", build, [])
    assert sorted(p.name for p in (prefix / "conda-meta").glob("*.json")) == [
        "libtorch-2.14.1-cuda130_generic_h2_200.json", "python-3.11.7-h0_0.json",
        f"pytorch-2.14.1-{GPU_2141.build}.json"]
