"""localbuild's stdlib reader of .ci_support files, checked against PyYAML as the oracle."""
from __future__ import annotations

import pytest
import yaml

from tests.support.build_locally import as_strings, config_yaml
from tests.support.paths import REPO_ROOT
from localbuild import ci_yaml
from localbuild.configs import CiConfig
from localbuild.overrides import derived_config_text


SMITHY_STYLE = """\
# comment at the top
blas_impl:
- mkl
cuda_compiler_version:
- '12.9'   # quoted version stays a string
docker_image:
- quay.io/condaforge/linux-anvil-x86_64-cuda12:alma9
megabuild:
- true
pin_run_as_build:
  python:
    min_pin: x.x
    max_pin: x.x
  libtorch:
    max_pin: x.x
python:
- 3.10.* *_cpython
- "3.11.* *_cpython"
channel_targets:
- conda-forge main
indented_list:
  - a
  - 'it''s'
flow_list: [a, 'b, c', "d"]
empty_list: []
empty_map: {}
nothing:
zip_keys:
- - c_compiler_version
  - cxx_compiler_version
-   - python
    - is_python_min
url: https://example.invalid/x#not-a-comment
"""


@pytest.mark.parametrize("text", [
    SMITHY_STYLE,
    config_yaml(),
    config_yaml(cuda="13.0", pythons=("3.12",), megabuild=False, rocm="6.4"),
])
def test_matches_pyyaml(text):
    assert ci_yaml.parse(text, "x.yaml").data == as_strings(yaml.safe_load(text))


@pytest.mark.parametrize("text, line, words", [
    ("a:\n- x\n  - y\n", 3, "unexpected indentation"),
    ("a:\n- 'x\n", 2, "unterminated 'quoted' string"),
    ('a:\n- "x\n', 2, 'unterminated "quoted" string'),
    ("a:\n- 'x' y\n", 2, "unexpected text after quoted string: 'y'"),
    ('a:\n- "x" y\n', 2, "unexpected text after quoted string: 'y'"),
    ("a:\n\t- x\n", 2, "tab"),
    ("a: &anchor\n", 1, "anchors"),
    ("a:\n- x\na:\n- y\n", 3, "duplicate key 'a'"),
    ("- x\n", 1, "key"),
    ("a:\n- x\njust text\n", 3, "expected 'key: value'"),
    ("a: |\n  block\n", 1, "block scalars"),
    ("a:\n-\n", 2, "empty list item"),
    ("a: {b: c}\n", 1, "flow mappings"),
    ("a: 1\n---\nb: 2\n", 2, "more than one YAML document"),
])
def test_errors_name_file_and_line(text, line, words):
    with pytest.raises(ci_yaml.CiYamlError) as info:
        ci_yaml.parse(text, ".ci_support/bad.yaml")
    message = str(info.value)
    assert message.startswith(f".ci_support/bad.yaml line {line}: "), message
    assert words in message
    assert "\n" not in message


def test_derived_config_keeps_zipped_entries_aligned(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text(config_yaml(pythons=("3.10", "3.11", "3.12", "3.13")))
    config = CiConfig("cfg", path, ci_yaml.load(path))
    keep = [entry.index for entry in config.pythons if entry.label == "3.12"]
    text = derived_config_text(config, keep)
    derived = yaml.safe_load(text)
    original = yaml.safe_load(path.read_text())
    assert derived["python"] == ["3.12.* *_cpython"]
    assert derived["is_python_min"] == [original["is_python_min"][2]] == ["false"]
    # everything else is byte-for-byte what conda-smithy wrote (quotes included)
    assert {k: v for k, v in derived.items() if k not in ("python", "is_python_min")} == \
        {k: v for k, v in original.items() if k not in ("python", "is_python_min")}
    assert "- '14'" in text and "- true" in text


@pytest.mark.parametrize("raw, label", [
    ("3.12.* *_cpython", "3.12"), ("3.13.* *_cp313t", "3.13t"), ("3.14 *_freethreading", "3.14t"),
    ("3.10", "3.10"),
])
def test_python_label(raw, label):
    from localbuild.configs import python_label
    assert python_label(raw) == label


def test_a_free_threaded_python_subset_keeps_its_own_entry():
    """--python 3.14t keeps the 3.14t entry of the config (and the values zipped with it), not
    3.14's: the derived config the run builds, and the dry run renders, is that one Python."""
    from localbuild.configs import load_config
    from localbuild.overrides import derived_config_text, python_subset
    from localbuild.request import BuildRequest

    name = next(p.stem for p in sorted((REPO_ROOT / ".ci_support").glob("linux_64_*gpu_backendcpu*.yaml")))
    config = load_config(REPO_ROOT, name)
    assert {"3.14", "3.14t"} <= {entry.label for entry in config.pythons}
    keep, why = python_subset(BuildRequest(pythons=("3.14t",)), config)
    assert why is None and len(keep) == 1
    lines = derived_config_text(config, keep).splitlines()
    assert "- 3.14.* *_cp314t" in lines
    assert not [line for line in lines if line.startswith("- 3.") and "_cp" in line and line != "- 3.14.* *_cp314t"]
    keep, why = python_subset(BuildRequest(pythons=("3.9",)), config)
    assert keep is None and why.startswith("no python 3.9: the config builds 3.10, ")


@pytest.mark.parametrize("path", sorted((REPO_ROOT / ".ci_support").glob("*.yaml")), ids=lambda p: p.stem[:40])
def test_build_locally_and_the_feedstock_tools_read_every_job_file_alike(path):
    """Two runtimes, two readers of the job files: build-locally.py's stdlib one and the tools'
    (feedstock.before_build.render.outputs.load_ci_config). They must agree on every file
    rerender writes, and the config's GPU (the driver's decision) must follow from either."""
    from feedstock.before_build.render.outputs import load_ci_config
    from localbuild.configs import load_config

    assert ci_yaml.load(path).data == load_ci_config(path)
    config = load_config(REPO_ROOT, path.stem)
    tools = load_ci_config(path)
    backend, version = config.gpu
    if backend == "cuda":
        assert tools["cuda_compiler_version"] == [version]
    elif backend == "rocm":
        assert tools["rocm_version"] == [version]
    else:
        assert tools.get("cuda_compiler_version", ["None"]) == ["None"]
