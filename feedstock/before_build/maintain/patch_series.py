"""The recipe's patch series: does it apply to a source (``patches check``), regenerate it from
a git branch (``patches refresh``).

The check applies the patches in recipe order with GNU ``patch`` to a scratch copy of only the
files they touch, so a patch that builds on an earlier one (0003 on 0001) is checked as the
build applies it, and a release tarball is read once.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ...atomic_files import replace_files
from ...errors import FeedstockError
from ...layout import Feedstock, escapes
from ...text_input import read_compared
from .recipe_lines import RecipeText, patch_list, recipe_files, replace_patch_list
from .source_tree import SourceFiles, load_source

_HUNK_OK = re.compile(r"^Hunk #(\d+) succeeded at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?\.")
_HUNK_FAILED = re.compile(r"^Hunk #(\d+) FAILED at (\d+)")
_PATCHING = re.compile(r"^(?:patching|checking) file '?(.+?)'?$")


@dataclass
class PatchResult:
    name: str                                       # path as listed in the recipe
    applies: bool
    notes: list[str] = field(default_factory=list)  # offsets and fuzz, "file: hunk #2 at 1750 (offset 6)"
    error: str = ""                                 # why it fails, with the first failing hunk
    failed_hunk: str = ""                           # that hunk's text

    def lines(self) -> list[str]:
        status = "applies" if self.applies else "FAILS"
        detail = "; ".join(self.notes) if self.notes else ("cleanly" if self.applies else "")
        out = [f"{status:8} {self.name}" + (f"  ({detail})" if detail else "")]
        if not self.applies:
            out.append(f"         {self.error}")
            out += [f"         | {line}" for line in self.failed_hunk.splitlines()]
        return out


def touched_files(patch_text: str) -> list[str]:
    """Paths (``-p1`` stripped) a unified diff reads or writes."""
    found: list[str] = []
    for match in re.finditer(r"^(?:---|\+\+\+) (\S+)", patch_text, re.M):
        path = match.group(1)
        if path == "/dev/null":
            continue
        rel = path.split("/", 1)[1] if "/" in path else path
        if rel not in found:
            found.append(rel)
    return found


def hunk_text(patch_text: str, file_rel: str, number: int) -> str:
    """Hunk ``number`` (1-based) of ``file_rel`` in the patch: its @@ line and body."""
    sections = re.split(r"^(?=--- )", patch_text, flags=re.M)
    for section in sections:
        header = re.match(r"--- \S+\n\+\+\+ (\S+)", section)
        if not header or header.group(1).split("/", 1)[-1] != file_rel:
            continue
        hunks = re.split(r"^(?=@@ )", section, flags=re.M)[1:]
        if 0 < number <= len(hunks):
            body = hunks[number - 1]
            # stop before a trailing git signature or the next diff header
            body = re.split(r"^(?:diff --git|-- $)", body, flags=re.M)[0]
            return body.rstrip("\n")
    return ""


def _patch_tool() -> str:
    tool = shutil.which("patch")
    if not tool:
        raise FeedstockError("GNU patch not found on PATH; install it (apt-get install patch) and rerun")
    return tool


def _run_patch(tool: str, patch_file: Path, workdir: Path, dry_run: bool) -> subprocess.CompletedProcess:
    cmd = [tool, "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-r", "-", "-i", str(patch_file)]
    if dry_run:
        cmd.append("--dry-run")
    env = dict(os.environ, LC_ALL="C")   # patch's messages are parsed below
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env)


def _result_of(name: str, patch_text: str, proc: subprocess.CompletedProcess) -> PatchResult:
    result = PatchResult(name=name, applies=proc.returncode == 0)
    current = ""
    for line in proc.stdout.splitlines():
        if match := _PATCHING.match(line):
            current = match.group(1)
        elif match := _HUNK_OK.match(line):
            parts = [f"hunk #{match.group(1)} at {match.group(2)}"]
            if match.group(4):
                parts.append(f"offset {match.group(4)}")
            if match.group(3):
                parts.append(f"fuzz {match.group(3)}")
            result.notes.append(f"{current}: " + ", ".join(parts))
        elif (match := _HUNK_FAILED.match(line)) and not result.failed_hunk:
            result.error = f"{current}: hunk #{match.group(1)} FAILED (expected at line {match.group(2)})"
            result.failed_hunk = hunk_text(patch_text, current, int(match.group(1)))
        elif "can't find file to patch" in line and not result.error:
            missing = touched_files(patch_text)
            result.error = f"file to patch not found in the source ({', '.join(missing)})"
        elif "Reversed (or previously applied) patch detected" in line and not result.error:
            result.error = f"{current}: already applied (reversed or previously applied patch)"
    if not result.applies and not result.error:
        result.error = (proc.stdout + proc.stderr).strip().splitlines()[-1:][0] if (proc.stdout + proc.stderr).strip() \
            else f"patch exited {proc.returncode}"
    return result


def patch_paths(feedstock: Feedstock) -> list[str]:
    """The patch list in recipe order: meta.yaml's (recipe.yaml's when there is no meta.yaml list)."""
    for recipe in recipe_files(feedstock.recipe_dir):
        listed = patch_list(recipe)
        if listed:
            return listed
    return []


def wanted_by_patches(feedstock: Feedstock, paths: list[str]) -> set[str]:
    wanted: set[str] = set()
    for rel in paths:
        patch_file = feedstock.recipe_dir / rel
        outside = escapes(feedstock.root, feedstock.recipe_dir, rel)
        if outside:
            raise FeedstockError(f"recipe lists patch {outside}; nothing was read: keep patches in recipe/patches/")
        if not patch_file.is_file():
            raise FeedstockError(f"recipe lists patch {rel} but recipe/{rel} does not exist; fix the patch list")
        wanted.update(touched_files(read_compared(patch_file)))
    return wanted


def check_series(feedstock: Feedstock, source: SourceFiles, paths: list[str]) -> list[PatchResult]:
    """Apply every patch in order to a scratch copy of the files it touches; one result each."""
    tool = _patch_tool()
    results = []
    with tempfile.TemporaryDirectory(prefix="feedstock-patches-") as scratch:
        workdir = Path(scratch)
        source.write_to(workdir)
        for rel in paths:
            patch_file = (feedstock.recipe_dir / rel).resolve()
            text = read_compared(patch_file)
            trial = _run_patch(tool, patch_file, workdir, dry_run=True)
            result = _result_of(rel, text, trial)
            if result.applies:
                _run_patch(tool, patch_file, workdir, dry_run=False)   # the next patch builds on it
            results.append(result)
    return results


def check_source(feedstock: Feedstock, source_path: Path) -> list[PatchResult]:
    paths = patch_paths(feedstock)
    wanted = wanted_by_patches(feedstock, paths)
    source = load_source(source_path, lambda rel: rel in wanted)
    return check_series(feedstock, source, paths)


# --- refresh: regenerate recipe/patches from a git branch -------------------------------------------

_CHURN = (
    re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001\n", re.M),   # the mbox line, commit hash
    re.compile(r"^Date: .*\n", re.M),                                      # changes on every rebase
    re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+(?: \d+)?\n", re.M),         # blob hashes
)


def stable_patch(text: str) -> str:
    """format-patch output without what churns between refreshes: hashes, dates, signature."""
    for pattern in _CHURN:
        text = pattern.sub("", text)
    return re.sub(r"\n-- \n[^\n]*\n*\Z", "\n", text)


def _subject(text: str) -> str:
    match = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n [^\n]*)*)", text, re.M)
    return " ".join(match.group(1).split()) if match else ""


def _git(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FeedstockError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip().splitlines()[-1:] or '?'}")
    return proc.stdout


@dataclass
class RefreshResult:
    written: list[str]       # patch files (names) written or rewritten
    unchanged: list[str]
    removed: list[str]       # listed before, not in the branch any more
    series: list[str]        # the new patch list, recipe paths


def refresh(feedstock: Feedstock, source_git: Path, base: str) -> RefreshResult:
    """Regenerate recipe/patches/ from the commits ``base..HEAD`` of ``source_git``."""
    if shutil.which("git") is None:
        raise FeedstockError("git not found on PATH; install git and rerun")
    if not (Path(source_git) / ".git").exists():
        raise FeedstockError(f"{source_git} is not a git checkout; pass the PyTorch checkout with your patch branch")
    proc = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], cwd=source_git,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise FeedstockError(f"{base} is not a tag or commit in {source_git}; pass --base v<version> (the release tag)")
    recipes = recipe_files(feedstock.recipe_dir)
    listed = patch_paths(feedstock)
    by_subject = {}
    for rel in listed:
        path = feedstock.recipe_dir / rel
        if path.is_file():
            by_subject.setdefault(_subject(read_compared(path)), rel)
    numbers = [int(m.group(1)) for rel in listed if (m := re.match(r"(\d+)-", Path(rel).name))]
    next_number = max(numbers, default=0) + 1
    with tempfile.TemporaryDirectory(prefix="feedstock-format-patch-") as scratch:
        # pin every setting a user's git config could change, so two maintainers get the same bytes
        _git(["-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false", "-c", "format.headers=",
              "format-patch", "--no-numbered", "--subject-prefix=PATCH", "--no-signature", "--no-cover-letter",
              "--no-thread", "--zero-commit", "--no-renames", "--stat=80", "--encoding=UTF-8", "-o", scratch,
              f"{base}..HEAD"], cwd=source_git)
        generated = sorted(Path(scratch).glob("*.patch"))
        if not generated:
            raise FeedstockError(f"no commits between {base} and HEAD in {source_git}; commit the patches on a branch")
        texts: dict[str, str] = {}
        series: list[str] = []
        for produced in generated:
            text = stable_patch(read_compared(produced))
            rel = by_subject.get(_subject(text))
            if rel is None or rel in series:
                slug = produced.name.split("-", 1)[1]
                rel = f"patches/{next_number:04d}-{slug}"
                next_number += 1
            series.append(rel)
            texts[rel] = text
    result = RefreshResult(written=[], unchanged=[], removed=[r for r in listed if r not in series], series=series)
    pending: dict[Path, str] = {}
    for rel, text in texts.items():
        path = feedstock.recipe_dir / rel
        if path.is_file() and read_compared(path) == text:
            result.unchanged.append(rel)
        else:
            result.written.append(rel)
            pending[path] = text
    for recipe in recipes:
        before = recipe.text
        replace_patch_list(recipe, series)
        if recipe.text != before:
            pending[recipe.path] = recipe.text
    replace_files(pending)
    for rel in result.removed:
        stale = feedstock.recipe_dir / rel
        if stale.is_file():
            stale.unlink()
    return result
