"""common/path_kinds.py: every path argument and input folder checked for kind in one place,
one line each (issue 49, part 5)."""
from __future__ import annotations

import os

import pytest

from common.input_files import NotUtf8Text, decode_text
from common.path_kinds import folder_problem, path_kind


def test_each_kind_is_named(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to("nowhere")
    os.mkfifo(tmp_path / "fifo")
    assert path_kind(tmp_path) == "a folder"
    assert path_kind(tmp_path / "file") == "a file"
    assert path_kind(tmp_path / "loop") == "a symbolic link loop"
    assert path_kind(tmp_path / "dangling") == "a symbolic link to nothing"
    assert path_kind(tmp_path / "fifo") == "a FIFO"
    assert path_kind(tmp_path / "file" / "below") == "below a file (not a folder)"
    assert path_kind(tmp_path / "missing") == "nothing"
    assert path_kind(f"{tmp_path}/a\0b") == "a path with a NUL byte"


def test_a_folder_belongs_there(tmp_path):
    (tmp_path / "file").write_text("x")
    assert folder_problem(tmp_path) is None
    assert folder_problem(tmp_path / "file") == "is a file; a folder belongs there"
    assert folder_problem("/dev/null") == "is a character device; a folder belongs there"
    assert folder_problem(tmp_path / "missing") == "does not exist"
    # an output folder may be made, where its parent is an ordinary folder
    assert folder_problem(tmp_path / "new" / "deeper", may_be_missing=True) is None
    assert folder_problem(tmp_path / "file" / "new", may_be_missing=True) == \
        "is below a file (not a folder); a folder belongs there"


@pytest.mark.parametrize("path", ["/proc/self", "/proc/no_such_entry", "/sys/kernel"])
def test_a_pseudo_filesystem_is_no_work_folder(path):
    if not os.path.isdir(os.path.dirname(path)):
        pytest.skip(f"no {os.path.dirname(path)} here")
    assert "pseudo-filesystem" in folder_problem(path, may_be_missing=True)


def test_a_nul_byte_is_no_text():
    # a job file's docker_image with a NUL reached subprocess: ValueError: embedded null byte
    with pytest.raises(NotUtf8Text, match=r"^job.yaml:3: byte 0x00 \(NUL\) is not text$"):
        decode_text(b"a: 1\nb: 2\ndocker_image: quay.io/a\0b\n", "job.yaml")
