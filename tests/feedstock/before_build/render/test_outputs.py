"""``python -m feedstock render``: every committed CI config rendered, outputs and pins checked."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest
import yaml

from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.feedstock_copy import copy_feedstock
from tests.support.paths import CPU_GENERIC_JOB, RECIPE_VERSION, REPO_ROOT
from feedstock.errors import FeedstockError
from feedstock.before_build.render.outputs import RenderedOutput, render_ci_config

CONFIGS = sorted(p.stem for p in (REPO_ROOT / ".ci_support").glob("*.yaml"))
CUDA_LIBS = {"cuda-cudart-dev", "libcublas-dev", "libcusolver-dev", "libcudnn-dev", "nccl"}
VERSION = RECIPE_VERSION
NEXT_MINOR = f"{VERSION.split('.')[0]}.{int(VERSION.split('.')[1]) + 1}.0a0"


def job(config: str) -> dict:
    return yaml.safe_load((REPO_ROOT / ".ci_support" / f"{config}.yaml").read_text())


def names(reqs: list[str]) -> set[str]:
    return {r.split()[0] for r in reqs}


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[RenderedOutput]]:
    return {config: render_ci_config(REPO_ROOT, config) for config in CONFIGS}


def test_there_are_configs_to_render():
    assert len(CONFIGS) >= 10


@pytest.mark.parametrize("config", CONFIGS)
def test_outputs_per_variant(rendered, config):
    values = job(config)
    backend = values["gpu_backend"][0]
    outputs = rendered[config]
    counts = Counter(o.name for o in outputs)
    expected = {"cpu": {"libtorch", "pytorch", "pytorch-tests", "pytorch-cpu"},
                "cuda": {"libtorch", "libtorch-cuda-linalg", "pytorch", "pytorch-tests", "pytorch-gpu"},
                "rocm": {"libtorch", "pytorch", "pytorch-tests", "pytorch-rocm"}}[backend]
    assert set(counts) == expected
    assert counts["libtorch"] == 1                       # built once per job
    assert counts["pytorch"] == len(values["python"])    # once per Python
    assert counts["pytorch-tests"] == len(values["python"])
    for tests_output in (o for o in outputs if o.name == "pytorch-tests"):
        # it tests exactly the pytorch of its variant and Python
        pytorch = next(o for o in outputs if o.name == "pytorch" and
                       o.build_string.rsplit("_h", 1)[0] == tests_output.build_string.rsplit("_h", 1)[0])
        pin = next(r for r in tests_output.requirements["run"] if r.startswith("pytorch "))
        tag = pytorch.build_string.rsplit("_h", 1)[0]
        assert pin == f"pytorch {pytorch.version} {tag}_*_{pytorch.build_number}"
        assert any("run_pytorch_tests.py" in str(c) for c in tests_output.tests["commands"])
    pys = sorted(o.build_string.split("_py")[1].split("_")[0] for o in outputs if o.name == "pytorch")
    # free-threaded Pythons (`3.14.* *_cp314t`) say so: py314t, never py314
    assert pys == sorted("".join(p.split(" ")[0].split(".")[:2]) + ("t" if p.endswith("t") else "")
                         for p in values["python"])
    if backend == "cuda":
        linalg = [o for o in outputs if o.name == "libtorch-cuda-linalg"]
        flavours = {o.build_string.split("_")[1]: o for o in linalg}
        assert set(flavours) == {"magma", "nomagma"}
        assert "libmagma-devel" in names(flavours["magma"].requirements["host"])
        assert "libmagma-devel" not in names(flavours["nomagma"].requirements["host"])
        # the solver prefers magma: nomagma carries a track_feature
        assert flavours["nomagma"].track_features and not flavours["magma"].track_features


@pytest.mark.parametrize("config", CONFIGS)
def test_requirements_that_distinguish_the_variant(rendered, config):
    values = job(config)
    backend, blas = values["gpu_backend"][0], values["blas_impl"][0]
    by_name = {o.name: o for o in rendered[config]}
    for output in (by_name["libtorch"], by_name["pytorch"]):
        host = names(output.requirements["host"])
        build = output.requirements["build"]
        if backend == "cuda":
            cuda = values["cuda_compiler_version"][0]
            assert CUDA_LIBS <= host, output.name
            assert f"cuda-version {cuda}" in output.requirements["host"]
            assert any(r.startswith(f"cuda-nvcc_{values['target_platform'][0]} {cuda}") for r in build)
            if "arm_variant_type" in values:  # linux-aarch64: the sbsa or tegra toolchain
                assert f"arm-variant * {values['arm_variant_type'][0]}" in build, output.name
            # the +200 CUDA build must not win on a machine without a driver
            assert "__cuda" in output.requirements["run"], output.name
        else:
            assert not host & CUDA_LIBS and "cuda-version" not in host, output.name
            assert not any(r.startswith("cuda-nvcc") for r in build)
            assert "__cuda" not in output.requirements.get("run", []), output.name
        if blas == "mkl":
            assert "mkl-devel" in host and not host & {"libblas", "liblapack"}
            assert "libblas * *mkl" in output.requirements["run"]
        else:
            assert {"libblas", "liblapack"} <= host and "mkl-devel" not in host
    if backend == "rocm":
        # ROCm comes from the build image's /opt/rocm, not from conda packages
        assert "rocm" in values["docker_image"][0]
        assert "pytorch-rocm" in by_name["pytorch"].track_features
        host_names = {n for o in rendered[config] for n in names(o.requirements.get("host", []))}
        assert not any("rocm" in n or "hip" in n for n in host_names), host_names


@pytest.mark.parametrize("config", CONFIGS)
def test_build_strings_name_the_variant_and_are_unique(rendered, config):
    values = job(config)
    backend, blas = values["gpu_backend"][0], values["blas_impl"][0]
    tag = {"cpu": "cpu", "cuda": "cuda" + values["cuda_compiler_version"][0].replace(".", ""),
           "rocm": "rocm" + values["rocm_version"][0].replace(".", "")}[backend]
    if backend == "cuda" and values.get("arm_variant_type") == ["tegra"]:
        tag += "tegra"  # Jetson builds share CUDA version and platform with the sbsa ones
    outputs = rendered[config]
    strings = [(o.name, o.build_string) for o in outputs]
    assert len(strings) == len(set(strings))
    bonus = (200 if backend == "cuda" else 0) + (100 if blas == "mkl" else 0)
    for o in outputs:
        assert o.version == VERSION
        assert o.build_string.startswith(tag + "_"), o.build_string
        assert f"_{blas}_" in o.build_string
        assert o.build_string.endswith(f"_{bonus}") and o.build_number == bonus
        hash_part = [p for p in o.build_string.split("_") if p.startswith("h") and len(p) == 8]
        assert len(hash_part) == 1 and int(hash_part[0][1:], 16) >= 0


@pytest.mark.parametrize("config", CONFIGS)
def test_pins_between_outputs(rendered, config):
    outputs = rendered[config]
    libtorch = next(o for o in outputs if o.name == "libtorch")
    exact = f"libtorch {VERSION} {libtorch.build_string}"
    assert libtorch.run_exports == [f"libtorch >={VERSION},<{NEXT_MINOR}"]    # x.x: no stable C++ ABI
    for o in outputs:
        if o.name in ("pytorch", "libtorch-cuda-linalg"):
            assert exact in o.requirements["run"], o.name            # pins libtorch exactly
            assert exact in o.requirements["host"], o.name
    for o in outputs:
        if o.name.startswith("pytorch-"):
            (pin,) = [r for r in o.requirements["run"] if r.startswith("pytorch ")]
            assert pin.startswith(f"pytorch {VERSION} {libtorch.build_string.rsplit('_h', 1)[0]}_")
    pytorch = [o for o in outputs if o.name == "pytorch"]
    assert all(f"pytorch >={VERSION},<{NEXT_MINOR}" in o.run_exports for o in pytorch)


def test_build_strings_unique_across_the_whole_matrix(rendered):
    seen = Counter((o.target_platform, o.name, o.build_string) for outs in rendered.values() for o in outs)
    assert [k for k, n in seen.items() if n > 1] == []


def test_hash_is_deterministic_and_follows_the_variant(rendered):
    again = render_ci_config(REPO_ROOT, CONFIGS[0])
    assert [o.build_string for o in again] == [o.build_string for o in rendered[CONFIGS[0]]]
    mkl = [c for c in CONFIGS if "blas_implmkl" in c and "cpu" in c][0]
    generic = mkl.replace("blas_implmkl", "blas_implgeneric")
    def libtorch_hash(c):
        return next(o for o in rendered[c] if o.name == "libtorch").build_string.split("_")[-2]
    assert libtorch_hash(mkl) != libtorch_hash(generic)


def test_render_cli_text_and_json():
    config = next(c for c in CONFIGS if "cuda_compiler_version12.9" in c)
    text = run_feedstock_cli("render", config)
    assert text.returncode == 0, text.stderr
    assert f"libtorch-cuda-linalg {VERSION} cuda129_magma_" in text.stdout
    assert "run_exports:" in text.stdout and "tests:" in text.stdout
    as_json = run_feedstock_cli("render", f"{config}.yaml", "--json")
    data = json.loads(as_json.stdout)
    assert {d["name"] for d in data} == {"libtorch", "libtorch-cuda-linalg", "pytorch", "pytorch-tests",
                                         "pytorch-gpu"}
    assert all({"build_string", "requirements", "run_exports", "tests"} <= set(d) for d in data)


def test_dev_tag_marks_every_build_string():
    config = CONFIGS[0]
    proc = run_feedstock_cli("render", config, "--json", env={"FEEDSTOCK_DEV_TAG": "abc1"})
    data = json.loads(proc.stdout)
    assert data and all(d["build_string"].startswith("devabc1_") for d in data)


def test_unknown_config_is_one_line_with_suggestions():
    proc = run_feedstock_cli("render", "linux_64_blas_implmklc_stdlib_version2.17cuda")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: config 'linux_64_blas_implmklc_stdlib_version2.17cuda' not found; did you mean ")
    assert "linux_64_blas_implmklc_stdlib_version2.17cuda_compiler_version12.9" in lines[0]
    with pytest.raises(FeedstockError, match="not found"):
        render_ci_config(REPO_ROOT, "osx_64_")


def test_suggestions_stay_on_the_typed_platform():
    # the README's example: a truncated linux-64 name must not suggest another platform's job
    with pytest.raises(FeedstockError) as err:
        render_ci_config(REPO_ROOT, "linux_64_cud")
    suggested = str(err.value).split("did you mean ", 1)[1].rstrip("?").split(", ")
    assert len(suggested) == 3 and all(name.startswith("linux_64_") for name in suggested), suggested


@pytest.mark.parametrize("value", ["linux-64", "[]", "[linux-64, osx-arm64]", "[linux64]"])
def test_malformed_target_platform_is_one_line(tmp_path, value):
    job_file = tmp_path / "broken.yaml"
    job_file.write_text((REPO_ROOT / ".ci_support" / f"{CONFIGS[0]}.yaml").read_text()
                        .replace("target_platform:\n- linux-64\n", f"target_platform: {value}\n"))
    assert f"target_platform: {value}" in job_file.read_text()
    proc = run_feedstock_cli("render", str(job_file))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: broken.yaml: target_platform must be a one-item list"), \
        proc.stderr


@pytest.mark.parametrize("old, new, message", [
    ("\n  number: {{ build }}\n", "\n  number: abc\n", "build/number of the top level is 'abc'"),
    ("\noutputs:\n", "\noutputs:\n  - 5\n", "outputs must be a list of mappings"),
    ("\noutputs:\n", "\noutputs: 5\nnot_outputs:\n", "unknown section 'not_outputs' (did you mean outputs?)"),
])
def test_malformed_recipe_is_one_line(feedstock_copy, old, new, message):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    assert text.count(old) == 1
    meta.write_text(text.replace(old, new))
    for args in (("render", CONFIGS[0]), ("rerender", "--check")):
        proc = run_feedstock_cli(*args, root=feedstock_copy)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: recipe/meta.yaml: ") and message in lines[0], \
            proc.stderr


def test_variant_pins_become_prefix_matches_as_in_conda_build(rendered):
    # "- libabseil" with the pinning's 20260526 renders as a prefix match; a pin that already has
    # a wildcard and a build string (libblas 3.9.* *netlib) is kept as it is
    pins = yaml.safe_load((REPO_ROOT / "pinning.yaml").read_text())
    config = next(c for c in CONFIGS if "blas_implgeneric" in c and "gpu_backendcpu" in c)
    host = next(o for o in rendered[config] if o.name == "libtorch").requirements["host"]
    assert f"libabseil {pins['libabseil'][0]}.*" in host
    assert f"libprotobuf {pins['libprotobuf'][0]}.*" in host
    assert f"libblas {pins['libblas'][0]}" in host and pins["libblas"][0].endswith("*netlib")




def _render_error(feedstock_copy, breakage) -> str:
    breakage(feedstock_copy)
    proc = run_feedstock_cli("render", CPU_GENERIC_JOB, root=feedstock_copy)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _append(rel: str, text: str):
    return lambda root: (root / rel).write_text((root / rel).read_text() + text)


def test_a_recipe_section_conda_build_does_not_know_is_refused(feedstock_copy):
    # before: rendered as if the section were not there, exit 0
    line = _render_error(feedstock_copy, _append("recipe/meta.yaml", "\nrequirement:\n  host: []\n"))
    assert "unknown section 'requirement' (did you mean requirements?)" in line


def test_a_key_given_twice_is_refused_where_yaml_keeps_the_last(feedstock_copy):
    # before: a traceback in meta.yaml ('str' object has no attribute 'get'); in a job file,
    # the second value silently won
    line = _render_error(feedstock_copy, _append("recipe/meta.yaml", "\npackage: again\n"))
    assert "key 'package' is given twice" in line
    fresh = feedstock_copy.parent / "fresh"
    copy_feedstock(fresh)
    line = _render_error(fresh, _append(f".ci_support/{CPU_GENERIC_JOB}.yaml", "target_platform:\n- linux-64\n"))
    assert f".ci_support/{CPU_GENERIC_JOB}.yaml" in line and "key 'target_platform' is given twice" in line


def test_an_unknown_selector_in_the_recipe_is_refused_by_render(feedstock_copy):
    # before: render printed the recipe without the lines the selector dropped, exit 0
    def misspell(root):
        meta = root / "recipe" / "meta.yaml"
        meta.write_text(meta.read_text().replace("# [linux]", "# [linnux]", 1))
    line = _render_error(feedstock_copy, misspell)
    assert "linnux (did you mean linux" in line and "render again" in line


def test_an_empty_or_binary_recipe_is_one_line(feedstock_copy):
    line = _render_error(feedstock_copy, lambda root: (root / "recipe" / "meta.yaml").write_text(""))
    assert "recipe/meta.yaml renders to no recipe" in line
    line = _render_error(feedstock_copy, lambda root: (root / "recipe" / "meta.yaml").write_bytes(bytes(range(256))))
    assert "recipe/meta.yaml:2: byte 0x80 is not UTF-8 text" in line   # 0x0a, a newline, comes first


def test_a_bom_or_crlf_recipe_renders_as_the_plain_one(feedstock_copy):
    plain = run_feedstock_cli("render", CPU_GENERIC_JOB, "--json", root=feedstock_copy)
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_bytes()
    meta.write_bytes(b"\xef\xbb\xbf" + text.replace(b"\n", b"\r\n"))
    marked = run_feedstock_cli("render", CPU_GENERIC_JOB, "--json", root=feedstock_copy)
    assert plain.returncode == marked.returncode == 0, marked.stderr
    assert json.loads(marked.stdout) == json.loads(plain.stdout)


def test_a_rendered_line_ending_in_brackets_is_a_selector_as_in_conda_build(feedstock_copy):
    """conda-build selects lines again after Jinja: a rendered `[...]` at a line's end is a selector
    with or without `#` (a false one drops the line, a true one keeps the line without it)."""
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    anchor = "        - typing_extensions >=4.10.0\n"
    extra = ("        - kept-by-a-true-one {{ '[linux]' }}\n"
             "        - dropped-by-a-false-one {{ '[osx]' }}\n")
    meta.write_text(text.replace(anchor, anchor + extra, 1))
    proc = run_feedstock_cli("render", CPU_GENERIC_JOB, "--json", root=feedstock_copy)
    assert proc.returncode == 0, proc.stderr
    pytorch = next(o for o in json.loads(proc.stdout) if o["name"] == "pytorch")
    run = pytorch["requirements"]["run"]
    assert "kept-by-a-true-one" in run and not any("dropped" in r or "[" in r for r in run), run


def test_a_rendered_selector_that_fails_is_one_line(feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    meta.write_text(meta.read_text().replace("        - typing_extensions >=4.10.0\n",
                                             "        - typing_extensions >=4.10.0 {{ '[1 +]' }}\n", 1))
    line = _render_error(feedstock_copy, lambda root: None)
    assert "recipe/meta.yaml (rendered on linux-64)" in line and "selector [1 +] does not parse" in line


def test_render_piped_into_head_ends_quietly():
    """A reader that stops early (`| head`) ends the render without a BrokenPipeError traceback:
    here the reader is gone before the render writes (its pipe's read end closed at once)."""
    proc = subprocess.Popen([sys.executable, "-m", "feedstock", "--feedstock-root", str(REPO_ROOT), "render",
                             CPU_GENERIC_JOB, "--json"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0 and stderr == "", stderr
