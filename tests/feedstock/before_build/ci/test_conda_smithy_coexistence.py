"""conda-smithy's `rerender` (the reference for our own rerender) must not clobber files we own.

Where the path lists come from: conda-smithy 3.44.9, `conda_smithy/configure_feedstock.py`
(`copy_feedstock_content` with its `feedstock_content/` folder, `render_readme`, the
`render_<provider>` functions, `clear_scripts`, `render_pixi`), confirmed by running it on a copy
of this feedstock (recipe/README.md, "Checking with the real tools"). conda-smithy's newest tags
(2026.x) honour `skip_render` at the same places.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest
import yaml

from tests.support.paths import REPO_ROOT

# Written only when skip_render does not name the path (or a folder above it); CODEOWNERS is
# written by the README step, so `README.md` in skip_render protects it too.
SMITHY_SKIPPABLE = {
    ".gitattributes": ".gitattributes",
    ".gitignore": ".gitignore",
    "LICENSE.txt": "LICENSE.txt",
    "build-locally.py": "build-locally.py",
    ".ci_support/README": ".ci_support/README",
    ".scripts/logging_utils.sh": ".scripts/logging_utils.sh",
    ".circleci/checkout_merge_commit.sh": ".circleci/checkout_merge_commit.sh",
    "README.md": "README.md",
    ".github/CODEOWNERS": "README.md",
}

# Written, rewritten or deleted whatever skip_render says (per CI provider; .ci_support/*.yaml
# too, which our rerender generates identically, so it is left out here).
SMITHY_UNSKIPPABLE = (
    ".github/workflows/conda-build.yml",
    ".scripts/build_steps.sh",
    ".scripts/run_docker_build.sh",
    ".scripts/run_osx_build.sh",
    ".scripts/run_win_build.bat",
    ".scripts/create_conda_build_artifacts.sh",
    ".scripts/create_conda_build_artifacts.bat",
    ".circleci/config.yml",
    ".circleci/fast_finish_ci_pr_build.sh",
    ".travis.yml",
    ".appveyor.yml",
    ".drone.yml",
    ".woodpecker.yml",
    "azure-pipelines.yml",
    ".azure-pipelines",
    "pixi.toml",
)


def skip_render(root: Path = REPO_ROOT) -> list[str]:
    config = yaml.safe_load((root / "conda-forge.yml").read_text()) or {}
    return list(config.get("skip_render") or [])


def listed(path: str, entries) -> bool:
    """conda-smithy's skip_render rule: an entry names the path or a folder above it."""
    candidates = {path, *(str(parent) for parent in PurePosixPath(path).parents)}
    return bool(candidates & set(entries))


def owned_files(root: Path = REPO_ROOT) -> set[str]:
    """The feedstock's files: git's list in a checkout, else every file on disk."""
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True)
    if proc.returncode == 0 and proc.stdout:
        return {name for name in proc.stdout.split("\0") if name and (root / name).exists()}
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}


def owns(path: str, files: set[str]) -> bool:
    return path in files or any(name.startswith(path + "/") for name in files)


def test_skip_render_covers_every_file_we_own_that_smithy_would_write():
    skip, files = skip_render(), owned_files()
    assert owns("README.md", files) and owns("build-locally.py", files)   # the list is really ours
    exposed = [path for path, entry in SMITHY_SKIPPABLE.items()
               if owns(path, files) and not listed(entry, skip)]
    assert exposed == [], f"add {exposed} to skip_render in conda-forge.yml"


def test_skip_render_keeps_every_skippable_smithy_file_out():
    """The reference run then adds only what it cannot be told to skip."""
    skip = skip_render()
    missing = sorted({entry for entry in SMITHY_SKIPPABLE.values() if not listed(entry, skip)})
    assert missing == [], f"add {missing} to skip_render in conda-forge.yml"


def test_skip_render_names_only_files_smithy_writes():
    """A misspelt entry (e.g. `Readme.md`) would protect nothing, silently."""
    unknown = [entry for entry in skip_render() if entry not in SMITHY_SKIPPABLE.values()]
    assert unknown == [], f"conda-smithy writes no {unknown}; fix or drop these skip_render entries"


def test_we_own_no_file_smithy_writes_regardless_of_skip_render():
    files = owned_files()
    clobbered = [path for path in SMITHY_UNSKIPPABLE if owns(path, files)]
    assert clobbered == [], (f"conda-smithy rerender overwrites or deletes {clobbered} whatever "
                             "skip_render says; give our file another name")


def test_the_checks_see_a_skip_render_gap(tmp_path):
    """The helpers above flag a feedstock that owns README.md without skipping it."""
    (tmp_path / "README.md").write_text("ours\n")
    (tmp_path / "conda-forge.yml").write_text("skip_render:\n  - .gitignore\n  - .circleci\n")
    skip = skip_render(tmp_path)
    files = owned_files(tmp_path)
    assert "README.md" in files
    assert not listed("README.md", skip)
    assert listed(".circleci/checkout_merge_commit.sh", skip)   # a folder covers its files


def _copy_tracked_tree(destination: Path) -> None:
    for name in sorted(owned_files()):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)


def test_real_conda_smithy_rerender_leaves_our_files_alone(tmp_path):
    """Runs the real tool when it is on PATH (it is not on PyPI; recipe/README.md says how to
    run it offline from source)."""
    smithy = shutil.which("conda-smithy")
    if smithy is None:
        pytest.skip("conda-smithy is not on PATH (not on PyPI; see recipe/README.md, "
                    "'Checking with the real tools')")
    root = tmp_path / "pytorch-feedstock"
    _copy_tracked_tree(root)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "feedstock"]):
        subprocess.run([*git, *command], cwd=root, check=True, capture_output=True)
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.run([smithy, "rerender", "--no-check-uptodate", "--exclusive-config-file",
                           "pinning.yaml"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    changed = [line for line in status if not line.startswith("A ")]
    assert changed == [], f"conda-smithy changed or deleted our files: {changed}"
    added = [line[3:] for line in status]
    unexpected = [path for path in added if not listed(path, SMITHY_UNSKIPPABLE)]
    assert added and unexpected == [], f"conda-smithy added files the lists above miss: {unexpected}"
