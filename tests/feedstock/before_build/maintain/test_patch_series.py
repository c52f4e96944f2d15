"""``python -m feedstock patches check|refresh``: the recipe's own patches on the real wheel's
``torch/utils/cpp_extension.py``, with real GNU patch and real git."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.paths import REPO_ROOT
from feedstock.before_build.maintain.recipe_lines import RecipeText, patch_list
from tests.support.pytorch_source import CPP_EXTENSION, git, pack, patched_files, wheel_file, wheel_header

pytestmark = [pytest.mark.download]

CPP_PATCHES = ("patches/0001-cpp_extension-find-conda-CUDA-target-directory.patch",
               "patches/0003-cpp_extension-include-external-pybind11.patch")
ATEN_PATCH = "patches/0002-ATenConfig-relocatable-include-dir.patch"
META = REPO_ROOT / "recipe" / "meta.yaml"
ALL_PATCHES = patch_list(RecipeText(META, META.read_text()))


@pytest.fixture
def wheel_tree(tmp_path, torch_wheel) -> Path:
    """pytorch-v2.13.0/ holding only the wheel's cpp_extension.py (a byte copy of the source file)."""
    if shutil.which("patch") is None:
        pytest.skip("GNU patch not on PATH")
    tree = tmp_path / "pytorch-v2.13.0"
    for rel, text in wheel_shipped(torch_wheel).items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    return tree


def wheel_shipped(wheel: Path) -> dict[str, str]:
    """The patched files the wheel ships: cpp_extension.py and the torch/csrc headers."""
    shipped = {CPP_EXTENSION: wheel_file(wheel, CPP_EXTENSION)}
    for rel in touched(ALL_PATCHES):
        if (text := wheel_header(wheel, rel)) is not None:
            shipped[rel] = text
    return shipped


def touched(patches: list[str]) -> set[str]:
    return {m.group(1) for p in patches
            for m in re.finditer(r"^\+\+\+ b/(\S+)", (REPO_ROOT / "recipe" / p).read_text(), re.M)}


def line_of(proc, patch: str) -> str:
    """The report line of one patch (the line starting with its status)."""
    found = [line for line in proc.stdout.splitlines() if line[:9].strip() in ("applies", "FAILS")
             and line[9:].split("  (")[0] == patch]
    assert len(found) == 1, proc.stdout
    return found[0]


def check(source: Path, root: Path = REPO_ROOT):
    proc = run_feedstock_cli("patches", "check", "--source", str(source), root=root)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_cpp_extension_patches_apply_to_the_real_wheel_file(wheel_tree, tmp_path):
    """Acceptance: in recipe order, 0003 on top of 0001; the files the wheel does not ship are reported."""
    tarball = pack(wheel_tree, "pytorch-v2.13.0", tmp_path / "src.tar.gz")
    from_wheel = [p for p in ALL_PATCHES if touched([p]) <= set(wheel_shipped_names(wheel_tree))]
    assert set(CPP_PATCHES) <= set(from_wheel)
    for source in (wheel_tree, tarball):
        proc = check(source)
        assert proc.returncode == 1
        assert line_of(proc, CPP_PATCHES[0]) == f"applies  {CPP_PATCHES[0]}  (cleanly)"
        assert line_of(proc, CPP_PATCHES[1]) == f"applies  {CPP_PATCHES[1]}  (cleanly)"
        for patch in from_wheel:
            assert line_of(proc, patch).startswith(f"applies  {patch}"), proc.stdout
        lines = proc.stdout.splitlines()
        for patch in set(ALL_PATCHES) - set(from_wheel):
            index = lines.index(line_of(proc, patch))
            assert lines[index] == f"FAILS    {patch}"
            assert lines[index + 1] == ("         file to patch not found in the source "
                                        f"({', '.join(sorted(touched([patch])))})")
        assert [line.split()[1] for line in lines if not line.startswith(" ")] == ALL_PATCHES   # recipe order
        assert proc.stderr.strip() == f"patches check: {len(from_wheel)} of {len(ALL_PATCHES)} apply"


def wheel_shipped_names(tree: Path) -> list[str]:
    return [p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()]


def test_offsets_are_reported(wheel_tree, torch_wheel):
    for rel, text in patched_files(torch_wheel, REPO_ROOT / "recipe" / "patches").items():
        (wheel_tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (wheel_tree / rel).write_text(text)
    path = wheel_tree / CPP_EXTENSION
    path.write_text("# two lines upstream added\n# at the top\n" + path.read_text())
    proc = check(wheel_tree)
    assert proc.returncode == 0, proc.stdout
    name = "torch/utils/cpp_extension.py"
    assert line_of(proc, CPP_PATCHES[0]) == (
        f"applies  {CPP_PATCHES[0]}  ({name}: hunk #1 at 7, offset 2; {name}: hunk #2 at 1747, offset 2; "
        f"{name}: hunk #3 at 1804, offset 2; {name}: hunk #4 at 2627, offset 2; {name}: hunk #5 at 3312, offset 2)")
    assert line_of(proc, CPP_PATCHES[1]) == f"applies  {CPP_PATCHES[1]}  ({name}: hunk #1 at 1738, offset 2)"
    assert line_of(proc, ATEN_PATCH) == (f"applies  {ATEN_PATCH}  "
                                         "(aten/src/ATen/CMakeLists.txt: hunk #1 at 951, offset -12)")
    assert proc.stderr.strip() == f"patches check: {len(ALL_PATCHES)} of {len(ALL_PATCHES)} apply"


def test_patches_in_recipe_order(wheel_tree, feedstock_copy):
    """The list order is the application order: swapped, each patch lands at other offsets."""
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    lines = text.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if CPP_PATCHES[0] in line)
    third = next(i for i, line in enumerate(lines) if CPP_PATCHES[1] in line)
    lines[first], lines[third] = lines[third], lines[first]
    meta.write_text("".join(lines))
    proc = check(wheel_tree, root=feedstock_copy)
    name = "torch/utils/cpp_extension.py"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("applies")]
    assert lines[:2] == [
        # written on top of 0001's added import line: alone it lands one line earlier
        f"applies  {CPP_PATCHES[1]}  ({name}: hunk #1 at 1735, offset -1)",
        # and 0001's later hunks move down by the 8 lines 0003 added
        f"applies  {CPP_PATCHES[0]}  ({name}: hunk #2 at 1753, offset 8; {name}: hunk #3 at 1810, offset 8; "
        f"{name}: hunk #4 at 2633, offset 8; {name}: hunk #5 at 3318, offset 8)",
    ]


def test_bad_source(tmp_path):
    proc = check(tmp_path / "nope")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: source {tmp_path / 'nope'} does not exist; pass a PyTorch checkout, "
                                   "unpacked tree or tarball")
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b not really gzip")
    proc = check(junk)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {junk} is not a tarball; pass the release tarball (pytorch-vX.Y.Z.tar.gz)"


def test_a_patch_outside_the_feedstock_is_refused_before_it_is_read(feedstock_copy, tmp_path):
    """Issue 35: a listed patch that is a symlink to /etc/passwd was opened and applied."""
    (feedstock_copy / "recipe" / "patches" / "0099-link.patch").symlink_to("/etc/passwd")
    meta = feedstock_copy / "recipe" / "meta.yaml"
    first = "    - patches/0001-cpp_extension-find-conda-CUDA-target-directory.patch\n"
    meta.write_text(meta.read_text().replace(first, first + "    - patches/0099-link.patch\n"))
    (tmp_path / "source").mkdir()
    proc = run_feedstock_cli("patches", "check", "--source", str(tmp_path / "source"), root=feedstock_copy)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: recipe lists patch patches/0099-link.patch resolves to /etc/passwd, "
                                   "outside the feedstock; nothing was read: keep patches in recipe/patches/")


# --- refresh --------------------------------------------------------------------------------------

def _subject(patch: Path) -> str:
    return re.search(r"^Subject: \[PATCH[^\]]*\] (.*)$", patch.read_text(), re.M).group(1)


@pytest.fixture
def patch_branch(wheel_tree, torch_wheel, feedstock_copy) -> Path:
    """A git checkout tagged v2.13.0 with the recipe's cpp_extension patches committed on a branch,
    one commit per patch with the patch's subject, plus one new commit."""
    if shutil.which("git") is None:
        pytest.skip("git not on PATH")
    repo = wheel_tree
    for rel, text in patched_files(torch_wheel, feedstock_copy / "recipe" / "patches").items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "PyTorch 2.13.0", cwd=repo)
    git("tag", "v2.13.0", cwd=repo)
    git("checkout", "-qb", "conda-patches", cwd=repo)
    for patch in sorted((feedstock_copy / "recipe" / "patches").glob("*.patch")):
        proc = subprocess.run(["patch", "-p1", "--batch", "-i", str(patch)], cwd=repo, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout
        git("add", "-A", cwd=repo)
        git("commit", "-qm", _subject(patch) + "\n\nWhy: see the recipe's patch.", cwd=repo)
    path = repo / CPP_EXTENSION
    path.write_text(path.read_text().replace("import importlib.abc\n", "import importlib.abc  # conda\n", 1))
    git("commit", "-qam", "cpp_extension: mark the conda build", cwd=repo)
    return repo


def test_refresh_keeps_names_and_comments_and_is_stable(patch_branch, feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    v1 = feedstock_copy / "recipe" / "recipe.yaml"
    v1_text = ("source:\n  sha256: " + "0" * 64 + "\n  patches:\n"
               + "".join(f"    # why {n}\n    - patches/{p.name}\n"
                         for n, p in enumerate(sorted((feedstock_copy / "recipe" / "patches").glob("*.patch"))))
               + "\nbuild:\n  number: 0\n")
    v1.write_text(v1_text)
    meta_before = meta.read_text()
    old_names = sorted(p.name for p in (feedstock_copy / "recipe" / "patches").glob("*.patch"))
    proc = run_feedstock_cli("patches", "refresh", "--source-git", str(patch_branch), "--base", "v2.13.0",
                             root=feedstock_copy)
    assert proc.returncode == 0, proc.stderr
    count = len(old_names) + 1
    new_name = f"{count:04d}-cpp_extension-mark-the-conda-build.patch"
    assert sorted(p.name for p in (feedstock_copy / "recipe" / "patches").glob("*.patch")) == old_names + [new_name]
    assert proc.stdout.splitlines()[-1] == f"patches refresh: {count} patches ({count} written, 0 unchanged, 0 removed)"
    # the list: one line added after the last patch, every comment kept, in both recipes
    last = f"    - patches/{old_names[-1]}\n"
    assert meta_before.count(last) == 1 and v1_text.count(last) == 1
    assert meta.read_text() == meta_before.replace(last, last + f"    - patches/{new_name}\n")
    assert v1.read_text() == v1_text.replace(last, last + f"    - patches/{new_name}\n")
    text = (feedstock_copy / "recipe" / "patches" / new_name).read_text()
    assert text.startswith("From: Test <test@example.invalid>\nSubject: [PATCH] cpp_extension: mark the conda build\n")
    assert not re.search(r"^(Date:|index [0-9a-f]|From [0-9a-f]{40})", text, re.M)
    assert not text.rstrip().endswith(tuple("0123456789")) and "\n-- \n" not in text
    # the regenerated series applies, and a second refresh changes nothing
    git("checkout", "-q", "v2.13.0", cwd=patch_branch)
    applied = check(patch_branch, root=feedstock_copy)
    assert applied.returncode == 0, applied.stdout
    git("checkout", "-q", "conda-patches", cwd=patch_branch)
    snapshot = {p.name: p.read_bytes() for p in (feedstock_copy / "recipe").rglob("*") if p.is_file()}
    again = run_feedstock_cli("patches", "refresh", "--source-git", str(patch_branch), "--base", "v2.13.0",
                              root=feedstock_copy)
    assert again.stdout.splitlines()[-1] == f"patches refresh: {count} patches (0 written, {count} unchanged, 0 removed)"
    assert {p.name: p.read_bytes() for p in (feedstock_copy / "recipe").rglob("*") if p.is_file()} == snapshot


def test_refresh_bad_input(patch_branch, feedstock_copy, tmp_path):
    before = {p.name: p.read_bytes() for p in (feedstock_copy / "recipe").rglob("*") if p.is_file()}
    proc = run_feedstock_cli("patches", "refresh", "--source-git", str(patch_branch), "--base", "v9.9.9",
                             root=feedstock_copy)
    assert (proc.returncode, proc.stderr.strip()) == (2, f"error: v9.9.9 is not a tag or commit in {patch_branch}; "
                                                         "pass --base v<version> (the release tag)")
    proc = run_feedstock_cli("patches", "refresh", "--source-git", str(tmp_path), "--base", "v2.13.0",
                             root=feedstock_copy)
    assert (proc.returncode, proc.stderr.strip()) == (2, f"error: {tmp_path} is not a git checkout; pass the PyTorch "
                                                         "checkout with your patch branch")
    proc = run_feedstock_cli("patches", "refresh", "--source-git", str(patch_branch), "--base", "HEAD",
                             root=feedstock_copy)
    assert (proc.returncode, proc.stderr.strip()) == (2, f"error: no commits between HEAD and HEAD in {patch_branch}; "
                                                         "commit the patches on a branch")
    assert {p.name: p.read_bytes() for p in (feedstock_copy / "recipe").rglob("*") if p.is_file()} == before
