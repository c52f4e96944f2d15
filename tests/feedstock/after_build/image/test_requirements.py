"""feedstock/after_build/image/requirements.py: a requirements file that would replace the image's torch is
refused, naming the line; one that accepts the installed torch passes."""
from __future__ import annotations

import pytest

from feedstock.errors import FeedstockError
from feedstock.after_build.image.envfile import Line
from feedstock.after_build.image.requirements import check_requirements, plan


@pytest.mark.parametrize("line", ["torch==2.14.0", "torch>=2.14", "Torch<2.13", "pytorch==2.12.1",
                                  "torch @ https://example.org/torch-2.14.0-cp311-linux_x86_64.whl",
                                  "torch[opt-einsum]~=2.14.0"])
def test_a_line_that_replaces_torch_is_refused_naming_it(tmp_path, line):
    req = tmp_path / "requirements.txt"
    req.write_text(f"# the app\nsix==1.17.0\n{line}\nidna\n")
    with pytest.raises(FeedstockError) as err:
        check_requirements(req, "2.13.0")
    assert str(err.value).startswith(f"{req}:3: {line!r} would replace the image's torch 2.13.0")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("line", ["torch", "torch==2.13.0", "torch>=2.10,<2.14", "torch~=2.13.0 ; python_version >= '3.10'",
                                  "torchvision==0.28.0", "# torch==2.14.0", "torch==2.13.*  # pinned"])
def test_lines_that_keep_the_torch_pass(tmp_path, line):
    req = tmp_path / "requirements.txt"
    req.write_text(f"six\n{line}\n")
    assert check_requirements(req, "2.13.0") == ["six", line]


def test_nested_files_cannot_be_checked_and_are_refused(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("six\n-r more.txt\n")
    with pytest.raises(FeedstockError, match=r"requirements.txt:2: '-r more.txt': nested"):
        check_requirements(req, "2.13.0")


@pytest.mark.parametrize("data", ["einops\ncafé-tools\n".encode("latin-1"), "einops\n".encode("utf-16")])
def test_a_requirements_file_that_is_not_utf8_is_one_line(tmp_path, data):
    """Issue 25: image --requirements with a Latin-1 or UTF-16 file was a UnicodeDecodeError traceback."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_bytes(data)
    with pytest.raises(FeedstockError, match="is not UTF-8 text; save the file as UTF-8"):
        check_requirements(requirements, "2.14.1")
    assert requirements.read_bytes() == data


def test_a_name_neither_the_links_nor_the_environment_has_is_refused_before_the_install(tmp_path):
    from feedstock.after_build.image.requirements import check_names_in_links

    links = tmp_path / "links"
    links.mkdir()
    for name in ("torch_cluster-1.6.3.tar.gz", "einops-0.8.2-py3-none-any.whl", "README"):
        (links / name).write_text("")
    lines = [Line("env.yml:9", "torch-cluster==1.6.3 --no-build-isolation"), Line("env.yml:10", "einops"),
             Line("env.yml:11", "numpy>=1.26"), Line("env.yml:12", "torch==2.13.0"),
             Line("env.yml:13", "tool @ https://example.org/tool-1.0.tar.gz")]
    check_names_in_links(plan(lines), links, {"numpy", "python"})
    typo = plan([Line("env.yml:9", "torch-clustr==1.6.3 --no-build-isolation")])
    with pytest.raises(FeedstockError) as caught:
        check_names_in_links(typo, links, {"numpy"})
    assert str(caught.value) == (f"env.yml:9: 'torch-clustr==1.6.3': --find-links {links} has no wheel or sdist "
                                 "of torch-clustr, nor does the conda environment; did you mean torch-cluster?")
    with pytest.raises(FeedstockError, match="put its wheel or sdist there$"):
        check_names_in_links(plan([Line("env.yml:3", "zzz")]), links, set())
