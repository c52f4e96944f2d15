"""``python -m feedstock bump`` on copies of the real feedstock, with release tarballs packed from a
source tree holding the real wheel's cpp_extension.py, and the real torch 2.13.0 wheel
(its files stand in for any release's source).

Each test compares whole files: only the lines a bump owns may change."""
from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest

from tests.support.feedstock_cli import run_feedstock_cli, snapshot
from tests.support.paths import REPO_ROOT
from feedstock.before_build.maintain.recipe_lines import RecipeText, patch_list
from tests.support.pytorch_source import CPP_EXTENSION, copy_tree, pack, source_files

pytestmark = [pytest.mark.download]

ALL_PATCHES = patch_list(RecipeText(REPO_ROOT / "recipe" / "meta.yaml", (REPO_ROOT / "recipe" / "meta.yaml").read_text()))
OLD_SHA = "d0ebad9ca4219959b29b7ad9ab6469fe49a3d668f8b5a62dd115f02f3a914447"

V1_RECIPE = """\
# v1 recipe written by the test (rattler-build format); only the context values may change
context:
  version: "2.14.1"
  build_number: 3   # reset on a new release
  triton: 3.7.1

recipe:
  name: libtorch-split
  version: ${{ version }}

source:
  url: https://github.com/pytorch/pytorch/releases/download/v${{ version }}/pytorch-v${{ version }}.tar.gz
  sha256: d0ebad9ca4219959b29b7ad9ab6469fe49a3d668f8b5a62dd115f02f3a914447
  patches:
    # conda CUDA lives in $PREFIX/targets
    - patches/0001-cpp_extension-find-conda-CUDA-target-directory.patch
    - patches/0002-ATenConfig-relocatable-include-dir.patch
    - patches/0003-cpp_extension-include-external-pybind11.patch

build:
  number: ${{ build_number }}

outputs:
  - package:
      name: pytorch
    requirements:
      host:
        - setuptools
      run:
        - python
        - sympy >=1.10   # a comment that keeps its column
        - if: linux
          then:
            - fsspec
        - triton ${{ triton }}
"""


def make_tree(root: Path, wheel: Path, version: str, triton: str = "3.8.0") -> Path:
    tree = root / f"tree-{version}"
    for rel, text in source_files(wheel, version, triton).items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tree


@pytest.fixture(scope="module")
def release(tmp_path_factory, torch_wheel) -> Path:
    """pytorch-v9.9.9.tar.gz: the patches apply (0002 at an offset); triton unchanged."""
    root = tmp_path_factory.mktemp("bump-release")
    return pack(make_tree(root, torch_wheel, "9.9.9"), "pytorch-v9.9.9", root / "pytorch-v9.9.9.tar.gz")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bump(root: Path, *args: str):
    proc = run_feedstock_cli("bump", *args, root=root)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def recipe_state(root: Path) -> dict[str, bytes]:
    state = {f"recipe/{p.name}": p.read_bytes() for p in sorted((root / "recipe").glob("*.yaml"))}
    state.update({f"recipe/patches/{p.name}": p.read_bytes() for p in sorted((root / "recipe" / "patches").iterdir())})
    state.update({f".ci_support/{k}": v for k, v in snapshot(root / ".ci_support").items()})
    state["pinning.yaml"] = (root / "pinning.yaml").read_bytes()
    return state


def test_bump_changes_only_version_sha_and_build_lines(feedstock_copy, release):
    """Acceptance: version, sha256 and build number lines of meta.yaml, every other byte kept."""
    meta = feedstock_copy / "recipe" / "meta.yaml"
    original = meta.read_text().replace("{% set build = 0 %}", "{% set build = 2 %}")
    meta.write_text(original)
    v1 = feedstock_copy / "recipe" / "recipe.yaml"   # the committed v1 recipe, edited the same way
    v1_original = v1.read_text().replace("  build_base: 0\n", "  build_base: 2\n")
    assert v1_original != v1.read_text()
    v1.write_text(v1_original)
    ci_before = snapshot(feedstock_copy / ".ci_support")
    proc = bump(feedstock_copy, "9.9.9", "--source", str(release), "--skip-patch-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = (original.replace('{% set version = "2.14.1" %}', '{% set version = "9.9.9" %}')
                .replace("{% set build = 2 %}", "{% set build = 0 %}")
                .replace(f"sha256: {OLD_SHA}", f"sha256: {sha256(release)}"))
    assert meta.read_text() == expected
    assert v1.read_text() == (v1_original.replace('  version: "2.14.1"\n', '  version: "9.9.9"\n')
                              .replace("  build_base: 2\n", "  build_base: 0\n")
                              .replace(f"sha256: {OLD_SHA}", f"sha256: {sha256(release)}"))
    assert snapshot(feedstock_copy / ".ci_support") == ci_before    # nothing it feeds changed
    assert proc.stdout.splitlines()[-3:-1] == ["wrote recipe/meta.yaml", "wrote recipe/recipe.yaml"]
    assert proc.stdout.splitlines()[-1].startswith(f"bump: 2.14.1 -> 9.9.9, sha256 {sha256(release)}, build number 0 (")


def test_bump_edits_recipe_yaml_too(feedstock_copy, torch_wheel, tmp_path):
    """Every recipe: the v1 recipe's context values, its sha256, and the wheel-following run bounds."""
    v1 = feedstock_copy / "recipe" / "recipe.yaml"
    v1.write_text(V1_RECIPE)
    meta = feedstock_copy / "recipe" / "meta.yaml"
    meta_before = meta.read_text()
    tarball = pack(make_tree(tmp_path, torch_wheel, "9.9.9", triton="3.9.0"), "pytorch-v9.9.9", tmp_path / "t.tar.gz")
    proc = bump(feedstock_copy, "9.9.9", "--source", str(tarball), "--wheel", str(torch_wheel), "--skip-patch-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    digest = sha256(tarball)
    assert v1.read_text() == (V1_RECIPE
                              .replace('version: "2.14.1"', 'version: "9.9.9"')
                              .replace("build_number: 3   #", "build_number: 0   #")
                              .replace("triton: 3.7.1", "triton: 3.9.0")
                              .replace(f"sha256: {OLD_SHA}", f"sha256: {digest}")
                              .replace("- sympy >=1.10   # a comment", "- sympy >=1.13.3 # a comment")
                              .replace("            - fsspec", "            - fsspec >=0.8.5"))
    assert meta.read_text() == (meta_before.replace('{% set version = "2.14.1" %}', '{% set version = "9.9.9" %}')
                                .replace('{% set triton = "3.8.0" %}', '{% set triton = "3.9.0" %}')
                                .replace(f"sha256: {OLD_SHA}", f"sha256: {digest}"))
    assert "recipe/meta.yaml: triton 3.8.0 -> 3.9.0 (from .ci/docker/triton_version.txt)" in proc.stdout
    assert "recipe/recipe.yaml: the wheel requires typing_extensions >=4.10.0, which is not a run requirement" \
        in proc.stdout
    assert "pinning.yaml: the wheel also lists Python 3.15; add it to the python pins once conda-forge builds it" \
        in proc.stdout


def test_bump_with_wheel_follows_requirements_and_python_floor(feedstock_copy, torch_wheel, release):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    pinning = feedstock_copy / "pinning.yaml"
    original = meta.read_text().replace("- networkx >=2.5.1", "- networkx >=2.4").replace("- jinja2", "- jinja2 >=2")
    meta.write_text(original)
    pins = pinning.read_text()
    old_python = pins.replace("  - 3.10.* *_cpython\n", "  - 3.9.* *_cpython\n  - 3.10.* *_cpython\n")
    # is_freethreading is zipped with python: 3.9 gets its entry, and loses it with 3.9
    old_python = old_python.replace("is_freethreading:\n", "is_freethreading:\n  - false\n")
    pinning.write_text(old_python)
    assert run_feedstock_cli("rerender", root=feedstock_copy).returncode == 0
    ci_with_39 = snapshot(feedstock_copy / ".ci_support")
    proc = bump(feedstock_copy, "9.9.9", "--source", str(release), "--wheel", str(torch_wheel))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert meta.read_text() == (original.replace('{% set version = "2.14.1" %}', '{% set version = "9.9.9" %}')
                                .replace(f"sha256: {OLD_SHA}", f"sha256: {sha256(release)}")
                                .replace("- networkx >=2.4", "- networkx >=2.5.1")
                                .replace("- jinja2 >=2", "- jinja2"))
    assert pinning.read_text() == pins          # 3.9 dropped: the release requires >=3.10
    assert "pinning.yaml: python 3.9 dropped (the release requires >=3.10)" in proc.stdout
    assert ", .ci_support/ rerendered (" in proc.stdout
    assert snapshot(feedstock_copy / ".ci_support") != ci_with_39
    assert run_feedstock_cli("rerender", "--check", root=feedstock_copy).returncode == 0
    # the patch check ran first: the recipe's patches on the wheel's cpp_extension.py and the ATen file
    assert "applies  patches/0001-cpp_extension-find-conda-CUDA-target-directory.patch  (cleanly)" in proc.stdout
    assert "applies  patches/0002-ATenConfig-relocatable-include-dir.patch  " \
           "(aten/src/ATen/CMakeLists.txt: hunk #1 at 951, offset -12)" in proc.stdout


def test_dry_run_prints_the_diff_and_writes_nothing(feedstock_copy, release):
    before = recipe_state(feedstock_copy)
    proc = bump(feedstock_copy, "9.9.9", "--source", str(release), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert recipe_state(feedstock_copy) == before
    diff = [line for line in proc.stdout.splitlines() if line.startswith(("+", "-"))]
    assert diff == ["--- a/recipe/meta.yaml", "+++ b/recipe/meta.yaml",
                    '-{% set version = "2.14.1" %}', '+{% set version = "9.9.9" %}',
                    f"-  sha256: {OLD_SHA}", f"+  sha256: {sha256(release)}",
                    "--- a/recipe/recipe.yaml", "+++ b/recipe/recipe.yaml",
                    '-  version: "2.14.1"', '+  version: "9.9.9"',
                    f"-  sha256: {OLD_SHA}", f"+  sha256: {sha256(release)}"]
    assert "nothing written" in proc.stderr


def test_failing_patch_stops_the_bump(feedstock_copy, torch_wheel, tmp_path):
    tree = make_tree(tmp_path, torch_wheel, "9.9.9")
    source = tree / CPP_EXTENSION
    # upstream rewrote the lines 0001's second hunk needs
    source.write_text(source.read_text().replace("            paths.append(cuda_home_include)\n",
                                                 "            paths.insert(0, cuda_home_include)\n"))
    tarball = pack(tree, "pytorch-v9.9.9", tmp_path / "t.tar.gz")
    before = recipe_state(feedstock_copy)
    proc = bump(feedstock_copy, "9.9.9", "--source", str(tarball))
    assert proc.returncode == 1
    assert recipe_state(feedstock_copy) == before
    lines = proc.stdout.splitlines()
    assert lines[0] == "FAILS    patches/0001-cpp_extension-find-conda-CUDA-target-directory.patch"
    assert lines[1] == "         torch/utils/cpp_extension.py: hunk #2 FAILED (expected at line 1745)"
    assert lines[2] == "         | @@ -1744,6 +1745,8 @@"
    assert lines[3:12] == [
        "         |          # but gcc doesn't like having /usr/include passed explicitly",
        "         |          if cuda_home_include != '/usr/include':",
        "         |              paths.append(cuda_home_include)",
        "         | +        if (cuda_target_include := _cuda_target_dir('include')) is not None:",
        "         | +            paths.append(cuda_target_include)",
        "         |  ",
        "         |          # Support CUDA_INC_PATH env variable supported by CMake files",
        "         |          if (cuda_inc_path := os.environ.get(\"CUDA_INC_PATH\", None)) and \\",
        "applies  patches/0002-ATenConfig-relocatable-include-dir.patch  "
        "(aten/src/ATen/CMakeLists.txt: hunk #1 at 951, offset -12)"]
    # 0003 changes the same file: without 0001's added import line above it, one line earlier
    assert lines[12] == ("applies  patches/0003-cpp_extension-include-external-pybind11.patch  "
                         "(torch/utils/cpp_extension.py: hunk #1 at 1735, offset -1)")
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: 1 of {len(ALL_PATCHES)} patches do not apply to pytorch-v9.9.9 (first: patches/0001-cpp_extension-find-conda-CUDA-"
        "target-directory.patch); nothing written; refresh them or pass --skip-patch-check")
    forced = bump(feedstock_copy, "9.9.9", "--source", str(tarball), "--skip-patch-check")
    assert forced.returncode == 0
    assert '{% set version = "9.9.9" %}' in (feedstock_copy / "recipe" / "meta.yaml").read_text()


def _two_tops(path: Path, tmp_path: Path) -> Path:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "g").write_text("y")
    with tarfile.open(path, "w:gz") as archive:
        archive.add(tmp_path / "a", arcname="pytorch-v9.9.9")
        archive.add(tmp_path / "b", arcname="extra")
    return path


def test_refusals_write_nothing(feedstock_copy, release, tmp_path):
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a tarball\n")
    two_tops = _two_tops(tmp_path / "two.tar.gz", tmp_path)
    wrong_top = tmp_path / "wrong.tar.gz"
    shutil.copy(release, wrong_top)
    cases = [
        (("2.13.0", "--source", str(release)),
         "error: version 2.13.0 is not newer than the recipe's 2.14.1; bump only moves forward (--allow-older to "
         "go back)"),
        (("2.14.1", "--source", str(release)),
         "error: version 2.14.1 is not newer than the recipe's 2.14.1; bump only moves forward (--allow-older to "
         "go back)"),
        (("2.14", "--source", str(release)),
         "error: version '2.14' is not a PyTorch release; write it like 2.14.0 or 2.14.0-rc1"),
        (("9.9.9", "--source", str(text_file)),
         f"error: {text_file} is not a tarball; pass the release tarball (pytorch-vX.Y.Z.tar.gz)"),
        (("9.9.9", "--source", str(tmp_path / "missing.tar.gz")),
         f"error: {tmp_path / 'missing.tar.gz'} does not exist; pass the release tarball (pytorch-vX.Y.Z.tar.gz)"),
        (("9.9.9", "--source", str(two_tops)),
         f"error: {two_tops} has no single top directory (pytorch-v9.9.9/ and extra/); pass the release tarball, "
         "which unpacks into pytorch-vX.Y.Z/"),
        (("9.9.10", "--source", str(wrong_top)),
         "error: wrong.tar.gz unpacks into pytorch-v9.9.9/, not pytorch-v9.9.10/; pass the tarball of PyTorch 9.9.10"),
        (("9.9.9", "--source", str(release), "--sha256", "0" * 64),
         f"error: sha256 of pytorch-v9.9.9.tar.gz is {sha256(release)}, not the --sha256 given ({'0' * 64}); "
         "download the tarball again"),
        (("9.9.9", "--source", str(tmp_path)),
         f"error: {tmp_path} is a directory; bump needs the release tarball (its sha256 goes into the recipe): "
         "pass pytorch-vX.Y.Z.tar.gz or its URL"),
        (("9.9.9-rc1", "--source", str(release)),
         "error: recipe/meta.yaml, recipe/recipe.yaml have no release-candidate rule ({% if \"rc\" in version %} "
         "source branch); add one or bump to a final release"),
    ]
    before = recipe_state(feedstock_copy)
    for args, message in cases:
        proc = bump(feedstock_copy, *args)
        assert (proc.returncode, proc.stderr.strip().splitlines()[-1]) == (2, message), args
        assert recipe_state(feedstock_copy) == before, args


def test_url_without_network_is_one_error_line(feedstock_copy):
    # port 9 (discard) on the loopback: nothing listens, as without network
    before = recipe_state(feedstock_copy)
    proc = bump(feedstock_copy, "9.9.9", "--source", "http://127.0.0.1:9/pytorch-v9.9.9.tar.gz")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: cannot download http://127.0.0.1:9/pytorch-v9.9.9.tar.gz ([Errno 111] Connection refused); "
        "without network, download the tarball elsewhere and pass --source pytorch-vX.Y.Z.tar.gz")
    assert recipe_state(feedstock_copy) == before


def test_release_candidate_with_the_recipes_rc_rule(feedstock_copy, torch_wheel, tmp_path):
    """With an rc branch in the source, an rc bump sets the rc sha256 and the upstream spelling."""
    # shown on meta.yaml alone (the v1 recipe has no rc rule yet; bump refuses while any recipe lacks one)
    (feedstock_copy / "recipe" / "recipe.yaml").unlink()
    meta = feedstock_copy / "recipe" / "meta.yaml"
    final_source = ("  url: https://github.com/pytorch/pytorch/releases/download/v{{ version }}/pytorch-v{{ version }}"
                    f".tar.gz\n  sha256: {OLD_SHA}\n")
    rc_source = ('{% if "rc" in version %}\n'
                 "  url: https://download.pytorch.org/source_code/test/pytorch-v{{ version }}.tar.gz\n"
                 f"  sha256: {'1' * 64}\n"
                 "{% else %}\n" + final_source + "{% endif %}\n")
    original = meta.read_text().replace(final_source, rc_source)
    assert original != meta.read_text()
    meta.write_text(original)
    tarball = pack(make_tree(tmp_path, torch_wheel, "2.15.0"), "pytorch-v2.15.0-rc1", tmp_path / "rc.tar.gz")
    proc = bump(feedstock_copy, "2.15.0-rc1", "--source", str(tarball), "--skip-patch-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert meta.read_text() == (original.replace('{% set version = "2.14.1" %}', '{% set version = "2.15.0-rc1" %}')
                                .replace(f"sha256: {'1' * 64}", f"sha256: {sha256(tarball)}"))
    # the final release is newer than its rc and sets the other branch's sha256
    final = pack(make_tree(tmp_path / "final", torch_wheel, "2.15.0"), "pytorch-v2.15.0", tmp_path / "final.tar.gz")
    proc = bump(feedstock_copy, "2.15.0", "--source", str(final), "--skip-patch-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"sha256: {sha256(final)}" in meta.read_text() and f"sha256: {sha256(tarball)}" in meta.read_text()


def test_url_is_downloaded_when_reachable(feedstock_copy, release):
    """A real HTTP server on the loopback serves the tarball; the sha256 is that of the bytes served."""
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(release.parent)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/{release.name}"
        proc = bump(feedstock_copy, "9.9.9", "--source", url, "--dry-run")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr
    assert f"+  sha256: {sha256(release)}" in proc.stdout.splitlines()


def test_allow_older_moves_back_to_an_older_wheel(feedstock_copy, torch_wheel, tmp_path):
    """--allow-older: a copy for an older release's wheel (the real-package tests package the
    2.13.0 wheel this way); the same release is accepted too."""
    meta = feedstock_copy / "recipe" / "meta.yaml"
    tarball = pack(make_tree(tmp_path, torch_wheel, "2.13.0"), "pytorch-v2.13.0", tmp_path / "old.tar.gz")
    proc = bump(feedstock_copy, "2.13.0", "--source", str(tarball), "--wheel", str(torch_wheel),
                "--skip-patch-check", "--allow-older")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '{% set version = "2.13.0" %}' in meta.read_text()
    assert proc.stdout.splitlines()[-1].startswith(f"bump: 2.14.1 -> 2.13.0, sha256 {sha256(tarball)}, build number 0")
    again = bump(feedstock_copy, "2.13.0", "--source", str(tarball), "--skip-patch-check", "--allow-older")
    assert again.returncode == 0, again.stdout + again.stderr
    assert run_feedstock_cli("rerender", "--check", root=feedstock_copy).returncode == 0
