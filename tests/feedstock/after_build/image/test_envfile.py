"""feedstock/after_build/image/envfile.py and requirements.plan: an environment file read as an
image's definition, and its pip: lines split between the build stage and the runtime pip step."""
from __future__ import annotations

import pytest

from feedstock.after_build.image.envfile import Line, check_torch_specs, read_environment
from feedstock.after_build.image.requirements import BuildItem, check_lines, plan
from feedstock.errors import FeedstockError

pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

GOOD = """\
name: app
channels:
  - ./build_artifacts
  - conda-forge
  - nodefaults
dependencies:
  - python=3.11
  - pytorch-cpu
  - numpy >=2
  - pip
  - pip:
    - einops==0.8.2
    - torch-scatter==2.1.2 --no-build-isolation
    - apex @ git+https://github.com/NVIDIA/apex@25.09 ; platform_machine == "x86_64"
"""


def write(tmp_path, text: str):
    path = tmp_path / "env.yml"
    path.write_text(text)
    return path


def test_channels_in_order_flavour_python_specs_and_pip_lines(tmp_path):
    env = read_environment(write(tmp_path, GOOD))
    assert env.channels == [str(tmp_path / "build_artifacts"), "conda-forge"]
    assert (env.flavour, env.python) == ("cpu", "3.11")
    assert [line.text for line in env.specs] == ["python=3.11", "numpy >=2", "pip"]
    assert [line.where for line in env.pip] == [f"{tmp_path / 'env.yml'}:{n}" for n in (12, 13, 14)]
    assert env.pip[1].text == "torch-scatter==2.1.2 --no-build-isolation"


def test_the_marked_line_and_the_vcs_line_go_to_the_build_stage(tmp_path):
    pips = plan(read_environment(write(tmp_path, GOOD)).pip)
    assert [line.text for line in pips.runtime] == ["einops==0.8.2"]
    where = str(tmp_path / "env.yml")
    assert pips.build == [
        BuildItem(f"{where}:13", "torch-scatter==2.1.2", isolated=False),
        BuildItem(f"{where}:14", 'apex @ git+https://github.com/NVIDIA/apex@25.09 ; platform_machine == "x86_64"',
                  isolated=True)]
    assert [line.text for line in pips.network_lines()] == [pips.build[1].requirement]


def test_a_mark_on_a_line_of_its_own_marks_the_whole_section():
    pips = plan([Line("r:1", "--no-build-isolation"), Line("r:2", "--extra-index-url https://example.org/simple"),
                 Line("r:3", "flash-attn==2.8.3 --config-settings=--build-option=--cpp_ext")])
    assert pips.options == ["--extra-index-url https://example.org/simple"]
    assert pips.build == [BuildItem("r:3", "flash-attn==2.8.3 --config-settings=--build-option=--cpp_ext", False)]
    assert pips.runtime == []


@pytest.mark.parametrize("line", ["torch==2.14.0 --hash=sha256:abc", "torch @ git+https://github.com/pytorch/pytorch"])
def test_a_pip_line_that_would_replace_torch_names_its_line(line):
    with pytest.raises(FeedstockError) as err:
        check_lines([Line("env.yml:8", "einops"), Line("env.yml:9", line)], "2.13.0")
    assert str(err.value) == f"env.yml:9: {line!r} would replace the image's torch 2.13.0; drop the line or accept 2.13.0"


def test_a_hash_option_does_not_hide_an_accepted_torch():
    check_lines([Line("env.yml:9", "torch==2.13.0 --hash=sha256:abc")], "2.13.0")


@pytest.mark.parametrize("text, says", [
    ("channels: [a\n", "invalid YAML"),
    ("- pytorch-cpu\n", "not an environment file"),
    ("channels: [x]\ndependencies: [python=3.11, numpy]\n", "no pytorch-cpu, pytorch-gpu or pytorch-rocm"),
    ("channels: [x]\ndependencies: [pytorch-cpu, pytorch-gpu]\n", "asks for a second flavour"),
    ("dependencies: [pytorch-cpu]\n", "no channels"),
    ("channels: [x]\ndependencies: [pytorch-cpu]\nvariables: {A: 1}\n", "unknown key 'variables'"),
    ("channels: [x]\ndependencies: [pytorch-cpu, {conda: [a]}]\n", "only a pip: section"),
    ("channels: [x]\ndependencies: [pytorch-cpu, 'numpy >=>= 2']\n", "is not a conda match spec"),
    ("channels: [x]\ndependencies:\n  - pytorch-cpu\n  - pip:\n    - {a: b}\n", "must be a string"),
])
def test_a_bad_environment_file_is_one_line(tmp_path, text, says):
    with pytest.raises(FeedstockError) as err:
        read_environment(write(tmp_path, text))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_conda_dependency_on_another_torch_names_its_line(tmp_path):
    env = read_environment(write(tmp_path, "channels: [x]\ndependencies:\n  - pytorch-cpu\n  - pytorch >=2.14\n"))
    with pytest.raises(FeedstockError, match=r"env.yml:4: 'pytorch >=2.14' would replace our channel's pytorch 2.13.0"):
        check_torch_specs(env, {"pytorch": {"2.13.0"}, "libtorch": {"2.13.0"}})
    env = read_environment(write(tmp_path, "channels: [x]\ndependencies: [pytorch-cpu, 'pytorch 2.13.*']\n"))
    check_torch_specs(env, {"pytorch": {"2.13.0"}})
