"""`python -m feedstock downstream` without packages: the catalog, bad input, the table, and the
pieces that read real files (pytest's JUnit report, a package's depends)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from feedstock.dependents_catalog import load_catalog, dependents_test_dir
from feedstock.after_build.downstream.channel import TorchBuild, flavour_of, matching
from feedstock.after_build.downstream.environment import cuda_of
from feedstock.after_build.downstream.run import libtorch_pin_problem
from feedstock.after_build.downstream.table import Row, format_table, summary
from feedstock.after_build.downstream.testrun import run_pytest
from feedstock.errors import FeedstockError
from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.paths import REPO_ROOT

CATALOG = REPO_ROOT / "recipe" / "dependents.yaml"


def test_catalog_has_one_dependent_of_each_kind_and_their_test_files():
    dependents = load_catalog(CATALOG)
    assert {d.kind for d in dependents} == {"pip-wheel", "conda-sdist", "conda-wheel"}
    assert len({d.source.sha256 for d in dependents if d.source}) == 4  # one file each
    for dependent in dependents:
        for name in dependent.test_files:
            assert (dependents_test_dir(CATALOG) / name).is_file(), name
        assert dependent.test_files or dependent.test_pyargs
    sdist = next(d for d in dependents if d.kind == "conda-sdist")
    assert sdist.source.file_name.endswith(".tar.gz") and len(sdist.source.sha256) == 64


@pytest.mark.parametrize("entry, message", [
    ("- {name: x, version: '1', kind: egg, flavour: cpu, torch: '*', tests: {files: [a.py]}}", "kind 'egg' is not one of"),
    ("- {name: x, version: '1', kind: pip-wheel, flavour: tpu, torch: '*', tests: {files: [a.py]}}", "flavour 'tpu'"),
    ("- {name: x, version: '1', kind: conda-sdist, flavour: cpu, torch: '*', tests: {files: [a.py]}}", "needs a source"),
    ("- {name: x, version: '1', kind: pip-wheel, flavour: cpu, torch: '*'}", "has no tests"),
    ("- {name: x, kind: pip-wheel, flavour: cpu, torch: '*', tests: {files: [a.py]}}", "needs a string 'version'"),
])
def test_a_bad_entry_is_one_line_naming_it(tmp_path, entry, message):
    catalog = tmp_path / "dependents.yaml"
    catalog.write_text("dependents:\n  " + entry + "\n")
    with pytest.raises(FeedstockError, match=message) as err:
        load_catalog(catalog)
    assert "dependent 'x'" in str(err.value) and "\n" not in str(err.value)


def test_a_channel_without_pytorch_is_one_line_and_the_table_is_printed(tmp_path):
    channel = tmp_path / "channel"
    channel.mkdir()
    proc = run_feedstock_cli("downstream", "--channel", str(channel), "--work", str(tmp_path / "work"))
    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: channel {channel} has no pytorch package; build one into it first "
                      "(python build-locally.py) or pass --channel"]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert [r.split("|")[1].strip() for r in rows] == [d.name for d in load_catalog(CATALOG)]
    assert all(r.split("|")[10].strip() == "skipped" for r in rows), rows
    assert proc.stdout.splitlines()[-1] == f"downstream: {len(rows)} dependents, 0 passed" and len(rows) == 6


def test_a_missing_channel_folder_is_one_line(tmp_path):
    proc = run_feedstock_cli("downstream", "--channel", str(tmp_path / "nowhere"), "einops")
    assert proc.returncode == 3
    assert f"error: channel {tmp_path / 'nowhere'} is not a folder" in proc.stderr
    assert "| einops " in proc.stdout


def test_an_unknown_name_is_one_line_before_anything_runs(tmp_path):
    # the channel is not even a folder: the name is refused first, alone
    proc = run_feedstock_cli("downstream", "--channel", str(tmp_path / "nowhere"), "einop", "einops")
    line = "unknown dependent 'einop'; did you mean einops? known: torchvision, torchaudio, torch-scatter, torch-cluster, einops, opt-einsum (recipe/dependents.yaml)"
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: {line}"]
    assert "| einops " not in proc.stdout


def test_bad_env_option_is_one_line(tmp_path):
    proc = run_feedstock_cli("downstream", "--env", f"tpu={tmp_path}")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --env tpu=")


def test_flavours_and_cuda_from_build_strings():
    assert flavour_of("cuda130_generic_py311_habc1234_200") == "gpu"
    assert flavour_of("devpy312_cpu_generic_py312_habc1234_0") == "cpu"
    assert flavour_of("rocm72_generic_py311_h1_0") == "rocm"
    gpu = TorchBuild("2.14.1", "cuda130_generic_py311_habc1234_200", "gpu", "3.11")
    cpu = TorchBuild("2.13.0", "cpu_generic_py311_habc1234_0", "cpu", "3.11")
    assert cuda_of(gpu) == "13.0" and cuda_of(cpu) is None
    assert matching([gpu, cpu], "any", ">=2.0") == [cpu, gpu]
    assert matching([gpu, cpu], "gpu", "2.13.*") == []


def test_the_newest_fitting_build_comes_first_compared_as_versions():
    builds = [TorchBuild(v, f"cpu_generic_py311_h{i}_0", "cpu", "3.11") for i, v in enumerate(("2.9.0", "2.13.0", "2.10.1"))]
    assert [b.version for b in matching(builds, "cpu", ">=2.0")] == ["2.13.0", "2.10.1", "2.9.0"]
    assert [b.version for b in matching(builds, "cpu", "<2.13")] == ["2.10.1", "2.9.0"]


def test_libtorch_pin_is_what_libtorchs_run_exports_give():
    assert libtorch_pin_problem(["python >=3.11,<3.12.0a0", "libtorch >=2.13.0,<2.14.0a0"], "2.13.0") == ""
    problem = libtorch_pin_problem(["python", "pytorch >=2.13.0"], "2.13.0")
    assert "lack a libtorch >=2.13,<2.14 pin" in problem and "pytorch >=2.13.0" in problem


def test_pytest_counts_come_from_its_junit_report(tmp_path):
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert 1 == 2, 'one is not two'\n"
        "@pytest.mark.skip(reason='no')\n"
        "def test_skip(): pass\n")
    counts = run_pytest(Path(sys.executable), ["test_sample.py"], tmp_path, {})
    assert (counts.passed, counts.failed, counts.skipped) == (1, 1, 1)
    assert counts.first_failure.startswith("test_bad: AssertionError: one is not two")


def test_the_dependents_tests_keep_their_temporary_files_in_the_rows_folder(tmp_path):
    """einops' own suite runs torch.compile, whose inductor put ~150 MB of precompiled headers
    under /tmp/torchinductor_$USER: a downstream run left them behind."""
    (tmp_path / "test_tmp.py").write_text(
        "import tempfile\n"
        "def test_where():\n"
        "    open(__import__('os').path.join(tempfile.gettempdir(), 'left.txt'), 'w').write('x')\n"
        "    assert tempfile.gettempdir().endswith('/tmp')\n")
    counts = run_pytest(Path(sys.executable), ["test_tmp.py"], tmp_path, {})
    assert (counts.passed, counts.failed) == (1, 0), counts.first_failure
    assert (tmp_path / "tmp" / "left.txt").is_file()


def test_table_has_a_row_each_and_the_notes():
    rows = [Row("a", "1", "pip wheel", "2.14.1 cuda130_generic_py311", "yes", 4, 0, 0, 12.3, "passed"),
            Row("b", "2", "rattler-build sdist", result="failed", note="x.cpp:1:2: error: boom")]
    text = format_table(rows)
    assert text.splitlines()[2].startswith("| a ") and "| 12s " in text.splitlines()[2]
    assert text.splitlines()[-1] == "  b: x.cpp:1:2: error: boom"
    assert summary(rows) == "downstream: 2 dependents, 1 passed"


@pytest.mark.parametrize("repodata", [b'{"info": {"subdir": "noarch"}, "packages": {}, "hand-made": true}\n',
                                      b'{"packages": {"broken'])
def test_the_channel_folder_passed_in_is_never_modified(tmp_path, repodata):
    """Issue 25: `downstream --channel DIR` rewrote DIR's index (a hand-made and a corrupt one
    were both replaced), even when the only dependent named was unknown."""
    channel = tmp_path / "channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_bytes(repodata)
    before = {p.relative_to(channel): p.read_bytes() for p in channel.rglob("*") if p.is_file()}
    for names in (["no-such-dependent"], ["einops"]):
        proc = run_feedstock_cli("downstream", "--channel", str(channel), "--work", str(tmp_path / "work"), *names)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        after = {p.relative_to(channel): p.read_bytes() for p in channel.rglob("*") if p.is_file()}
        assert after == before


@pytest.mark.parametrize("content, words", [
    (b"dependents: [einops\n", "invalid YAML"),
    (b"- einops\n- torchvision\n", "must be a mapping with a 'dependents:' list, not a list"),
    (b"dependents:\n  - name: caf\xe9\n", "byte 0xe9 is not UTF-8 text"),
    ("dependents: []\n".encode("utf-16"), "is not UTF-8 text"),
])
def test_a_broken_catalog_is_one_line(tmp_path, content, words):
    """Issue 25: ScannerError, AttributeError and UnicodeDecodeError tracebacks."""
    catalog = tmp_path / "dependents.yaml"
    catalog.write_bytes(content)
    proc = run_feedstock_cli("downstream", "--catalog", str(catalog), "--channel", str(tmp_path), "einops")
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0] and "Traceback" not in proc.stderr, proc.stderr
    assert catalog.read_bytes() == content
