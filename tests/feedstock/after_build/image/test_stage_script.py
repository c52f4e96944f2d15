"""feedstock/after_build/image/stage_script.py (the build stage's driver) and how build_stage.py
reads its output, without a container: unpacking at a fixed path, the per-requirement options
pip wheel gets, the one line a failed build becomes."""
from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

from feedstock.after_build.image import stage_script
from feedstock.after_build.image.build_stage import _failure
from feedstock.after_build.image.requirements import BuildItem


def _tar(path, names):
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    return path


def test_an_sdist_unpacks_to_its_one_top_folder(tmp_path):
    archive = _tar(tmp_path / "torch_scatter-2.1.2.tar.gz", ["torch_scatter-2.1.2/setup.py", "torch_scatter-2.1.2/csrc/a.cpp"])
    assert stage_script.unpack(archive, tmp_path / "src") == tmp_path / "src" / "torch_scatter-2.1.2"
    assert (tmp_path / "src" / "torch_scatter-2.1.2" / "csrc" / "a.cpp").read_bytes() == b"x"
    with zipfile.ZipFile(tmp_path / "apex-25.9.zip", "w") as zf:
        zf.writestr("apex-25.9/setup.py", "x")
    assert stage_script.unpack(tmp_path / "apex-25.9.zip", tmp_path / "zsrc") == tmp_path / "zsrc" / "apex-25.9"
    two = _tar(tmp_path / "two.tar.gz", ["a/setup.py", "b/setup.py"])
    assert stage_script.unpack(two, tmp_path / "two") is None


@pytest.mark.parametrize("requirement, options", [
    ("torch-scatter==2.1.2", []),
    ("flash-attn==2.8.3 --config-settings=--build-option=--cpp_ext --hash=sha256:abc",
     ["--config-settings=--build-option=--cpp_ext"]),
    ("apex @ git+https://github.com/NVIDIA/apex -C build-option=--cuda_ext", ["-C", "build-option=--cuda_ext"]),
])
def test_pip_wheel_gets_the_per_requirement_build_options_but_not_the_hash(requirement, options):
    assert stage_script.wheel_options(requirement) == options


def test_a_failed_build_is_its_line_and_the_first_compiler_error():
    items = [BuildItem("env.yml:10", "einops==0.8.2", True), BuildItem("env.yml:11", "broken-ext==0.1", False)]
    stdout = ("::item 0\nSaved ./einops.whl\n::item 1\n  error: subprocess-exited-with-error\n"
              "  FAILED: /build/src/broken_ext-0.1/build/temp/broken.o\n"
              "  /build/src/broken_ext-0.1/broken.cpp:2:27: error: 'undeclared_name' was not declared in this scope\n")
    line = _failure(items, stdout, "::failed 1\n")
    assert line == ("env.yml:11: building 'broken-ext==0.1' in the build stage failed: "
                    "/build/src/broken_ext-0.1/broken.cpp:2:27: error: 'undeclared_name' was not declared in this scope")
    assert _failure(items, "", "Error: crun: cannot start\n") == "the build stage failed: Error: crun: cannot start"
