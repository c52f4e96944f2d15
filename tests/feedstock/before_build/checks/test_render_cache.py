"""Parity's render cache: a second run takes rattler-build's renders from it and finds exactly
what rendering finds; an edit of recipe.yaml or of a job file renders again where it matters;
a broken cache file is rendered over; the switch turns it off."""
from __future__ import annotations

import pytest

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")

from feedstock.before_build.checks.parity import parity  # noqa: E402
from feedstock.before_build.checks.render_cache import DISABLE  # noqa: E402

# the first test renders the whole matrix (seconds); the others one job, without the platforms
pytestmark = [pytest.mark.slow]

CPU_JOB = "linux_64_blas_implmklc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTORCH_FEEDSTOCK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(DISABLE, raising=False)
    return tmp_path / "cache" / "parity-renders"


def test_a_second_run_renders_nothing_and_finds_the_same(feedstock_copy, cache):
    first = parity(feedstock_copy)
    assert first.rendered > 20 and first.cached == 0
    second = parity(feedstock_copy)
    assert second.rendered == 0 and second.cached == first.rendered
    assert (second.summary, second.differences) == (first.summary, first.differences)
    assert len(list(cache.glob("*.json"))) == 1


def one_job(root):
    return parity(root, configs=[CPU_JOB], platforms=False)


def test_a_recipe_yaml_drift_is_found_after_a_cached_run(feedstock_copy, cache):
    assert one_job(feedstock_copy).rendered == 1
    recipe = feedstock_copy / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    pytorch = text.index("      name: pytorch\n")   # the pytorch output's host list
    line = text.index("        - pybind11-abi\n", pytorch)
    recipe.write_text(text[:line] + text[line + len("        - pybind11-abi\n"):])
    report = one_job(feedstock_copy)
    assert report.cached == 0 and report.rendered == 1
    assert any("pybind11-abi" in line for line in report.differences), report.differences[:5]


def test_a_job_file_edit_renders_that_job_again(feedstock_copy, cache):
    first = one_job(feedstock_copy)
    assert one_job(feedstock_copy).cached == 1
    job = feedstock_copy / ".ci_support" / f"{CPU_JOB}.yaml"
    job.write_text(job.read_text() + "# touched\n")
    report = one_job(feedstock_copy)
    assert report.rendered == 1 and report.cached == 0
    assert report.differences == first.differences


def test_a_broken_cache_file_is_rendered_over(feedstock_copy, cache):
    first = one_job(feedstock_copy)
    [file] = cache.glob("*.json")
    file.write_bytes(b"\xff{ not json")
    report = one_job(feedstock_copy)
    assert report.rendered == 1 and report.differences == first.differences
    assert one_job(feedstock_copy).rendered == 0
    # a hand-edited entry of the wrong shape: rendered again, never a traceback
    text = file.read_text()
    file.write_text(text.replace('"build_number"', '"no_such_field"'))
    again = one_job(feedstock_copy)
    assert again.rendered == 1 and again.differences == first.differences


def test_the_switch_turns_it_off(feedstock_copy, cache, monkeypatch):
    monkeypatch.setenv(DISABLE, "1")
    one_job(feedstock_copy)
    report = one_job(feedstock_copy)
    assert report.cached == 0 and report.rendered == 1
    assert not cache.exists()
