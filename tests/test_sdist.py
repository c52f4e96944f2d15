"""tests/support/sdist.py: the sdist the build-stage tests hand to pip."""
from __future__ import annotations

import tarfile

from tests.support.sdist import write_sdist


def test_one_top_folder_with_pkg_info_and_the_files(tmp_path):
    path = write_sdist(tmp_path / "tiny_ext-0.2.tar.gz", "tiny_ext-0.2", {"setup.py": "x = 1\n", "src/a.cpp": ""},
                       name="tiny-ext")
    with tarfile.open(path) as tar:
        assert sorted(tar.getnames()) == ["tiny_ext-0.2/PKG-INFO", "tiny_ext-0.2/setup.py", "tiny_ext-0.2/src/a.cpp"]
        pkg_info = tar.extractfile("tiny_ext-0.2/PKG-INFO").read().decode()
        assert tar.extractfile("tiny_ext-0.2/setup.py").read() == b"x = 1\n"
    assert pkg_info == "Metadata-Version: 2.1\nName: tiny-ext\nVersion: 0.2\n"


def test_the_name_defaults_to_the_folders(tmp_path):
    path = write_sdist(tmp_path / "broken_ext-0.1.tar.gz", "broken_ext-0.1", {})
    with tarfile.open(path) as tar:
        assert "Name: broken_ext\nVersion: 0.1\n" in tar.extractfile("broken_ext-0.1/PKG-INFO").read().decode()
