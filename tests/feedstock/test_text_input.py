"""feedstock/text_input.py: the tools' one reader of input files."""
from __future__ import annotations

import os
import time

import pytest

from feedstock.errors import FeedstockError
from feedstock.text_input import (MAX_DEPTH, MAX_EXPANDED_NODES, MAX_INPUT_BYTES, UnreadableInput, load_yaml,
                                  read_json, read_text, read_yaml)


def test_a_bom_is_dropped_and_crlf_kept_for_yaml_to_read(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_bytes(b"\xef\xbb\xbfkey: 1\r\nother: [a, b]\r\n")
    assert read_text(path).startswith("key: 1")
    assert read_yaml(path) == {"key": 1, "other": ["a", "b"]}


@pytest.mark.parametrize("make, needle", [
    (lambda p: p.mkdir(), "x.yaml is a folder; a file belongs there"),
    (lambda p: p.symlink_to(p.name), "x.yaml is a symbolic link loop"),
    (lambda p: p.symlink_to("nowhere"), "x.yaml is a symbolic link to nothing (nowhere)"),
    (lambda p: p.write_bytes(b"a: 1\nb: caf\xe9\n"), "x.yaml:2: byte 0xe9 is not UTF-8 text"),
    # what is not a regular file is refused before a byte is read: a FIFO would block forever,
    # /dev/zero fill the memory
    (lambda p: os.mkfifo(p), "x.yaml is a FIFO, not a regular file"),
    (lambda p: p.symlink_to("/dev/zero"), "x.yaml is a character device, not a regular file"),
    (lambda p: (p.write_bytes(b""), os.truncate(p, MAX_INPUT_BYTES + 1)),
     f"x.yaml is larger than {MAX_INPUT_BYTES >> 20} MiB, the limit for this file"),
])
def test_what_is_not_a_readable_file_is_one_error(tmp_path, make, needle):
    path = tmp_path / "x.yaml"
    make(path)
    with pytest.raises(UnreadableInput) as caught:
        read_text(path, "x.yaml")
    assert needle in str(caught.value)
    assert isinstance(caught.value, FeedstockError)


def test_only_a_path_with_nothing_there_is_absent(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "missing.yaml")


@pytest.mark.parametrize("strings", [True, False])
def test_a_key_twice_is_refused_with_both_lines(strings):
    with pytest.raises(UnreadableInput) as caught:
        load_yaml("a: 1\nb: 2\na: 3\n", "f.yaml", strings=strings)
    assert "f.yaml:3: key 'a' is given twice (first at line 1)" in str(caught.value)


def test_lines_map_back_through_removed_selector_lines():
    # text line 2 was line 5 of the file before selectors removed lines
    with pytest.raises(UnreadableInput) as caught:
        load_yaml("a: 1\na: 2\n", "cbc.yaml", strings=True, line_map=[1, 5], context=" on linux-64")
    assert str(caught.value).startswith("cbc.yaml:5: key 'a' is given twice (first at line 1) on linux-64")


def test_strings_keep_versions_as_written():
    assert load_yaml("python:\n- 3.10\n", "x", strings=True) == {"python": ["3.10"]}
    assert load_yaml("python:\n- 3.10\n", "x") == {"python": [3.1]}


def test_invalid_yaml_and_json_name_the_line(tmp_path):
    with pytest.raises(UnreadableInput, match=r"^x.yaml:2: invalid YAML"):
        load_yaml("a: 1\nb: c: d\n", "x.yaml")
    path = tmp_path / "repodata.json"
    path.write_text('{"packages":\n {]\n')
    with pytest.raises(UnreadableInput, match=r"repodata.json:2: not valid JSON"):
        read_json(path)


def test_json_nested_past_the_scanner_is_one_line(tmp_path):
    # json's C scanner recurses per level: a RecursionError traceback before (deps --repodata)
    path = tmp_path / "repodata.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(UnreadableInput, match=r"repodata.json:1: nested more than 64 levels deep"):
        read_json(path)


def test_json_is_refused_by_its_depth_before_the_parser_recurses(tmp_path):
    # issue 49, part 4: YAML's limit for JSON too, counted outside strings, naming the line
    path = tmp_path / "batch.json"
    path.write_text('{"a": "' + "[" * 500 + '",\n "b":\n' + "[" * 65 + "]" * 65 + "}")
    with pytest.raises(UnreadableInput, match=r"batch.json:3: nested more than 64 levels deep"):
        read_json(path)
    path.write_text('{"a": "' + "[" * 500 + '", "b": ' + "[" * 60 + "]" * 60 + "}")
    assert len(read_json(path)) == 2


BILLION_LAUGHS = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['x'] * 9)}]\n"
                         for prev, name in zip([None, *"abcdefgh"], "abcdefghi"))


@pytest.mark.parametrize("text, line, needle", [
    ("[" * 100_000, 1, f"nested more than {MAX_DEPTH} levels deep"),              # a SIGSEGV in PyYAML's C loader
    ("x: " + "[" * 100_000 + "]" * 100_000 + "\n", 1, f"nested more than {MAX_DEPTH} levels deep"),
    ("a: 1\nb:\n" + "- " * 100_000 + "x\n", 3, f"nested more than {MAX_DEPTH} levels deep"),
    ("a: &x [1, 2]\nb: *x\n", 1, "anchors and aliases (&, *) are not allowed in this file"),
    (BILLION_LAUGHS, 1, "anchors and aliases (&, *) are not allowed in this file"),
])
@pytest.mark.parametrize("strings", [True, False])
def test_depth_and_aliases_are_refused_before_parsing(text, line, needle, strings):
    started = time.monotonic()
    with pytest.raises(UnreadableInput) as caught:
        load_yaml(text, "f.yaml", strings=strings)
    message = str(caught.value)
    assert message.startswith(f"f.yaml:{line}: ") and needle in message and "\n" not in message
    assert time.monotonic() - started < 10


def test_where_aliases_are_allowed_their_expansion_is_bounded():
    assert load_yaml("a: &x [1, 2]\nb: *x\n", "recipe.yaml", aliases=True) == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(UnreadableInput) as caught:
        load_yaml(BILLION_LAUGHS, "recipe.yaml", aliases=True)
    assert f"more than {MAX_EXPANDED_NODES} values once its aliases are expanded" in str(caught.value)


def test_the_limits_leave_room_for_the_real_inputs(repo_root):
    """Every YAML input of this feedstock reads as before (the deepest is far below the limit)."""
    for path in [*repo_root.glob("*.yml"), *repo_root.glob("*.yaml"), *(repo_root / ".ci_support").glob("*.yaml"),
                 repo_root / "recipe" / "conda_build_config.yaml", repo_root / "recipe" / "dependents.yaml"]:
        read_yaml(path, strings=True)


def test_a_text_parsed_before_comes_back_as_a_copy_of_its_own():
    """load_yaml keeps each text's parse (lint renders many variants to the same text): a caller
    that changes what it got changes nothing for the next caller, and a refusal is raised every
    time, with the label of that call."""
    text = "a:\n  b: [1, 2]\n  c: {d: x}\n"
    first = load_yaml(text, "one.yaml")
    first["a"]["b"].append(3)
    first["a"]["c"]["d"] = "changed"
    assert load_yaml(text, "two.yaml") == {"a": {"b": [1, 2], "c": {"d": "x"}}}
    for label in ("one.yaml", "two.yaml"):
        with pytest.raises(UnreadableInput, match=f"^{label}:2: key 'k' is given twice"):
            load_yaml("k: 1\nk: 2\n", label)
