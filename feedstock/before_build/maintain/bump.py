"""``bump``: move every recipe to a new PyTorch release.

Everything is computed first (version, sha256, pins that follow the release, patch check); only
then are the recipes written, all at once. A refused bump writes nothing.
"""
from __future__ import annotations

import difflib
import re
import shutil
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from rattler import Version

from common.hashing import sha256_of
from common.nesting import too_deep

from ...atomic_files import replace_files
from ...errors import FeedstockError
from ...text_input import load_yaml, read_text
from ...layout import Feedstock, load_feedstock
from .patch_series import PatchResult, check_series, patch_paths, wanted_by_patches
from .recipe_lines import (RecipeText, get_triton, get_version, has_rc_rule, recipe_files, set_build_number,
                           set_run_requirements, set_sha256, set_triton, set_version)
from .source_tree import SourceFiles, check_tarball, load_source
from .wheel_metadata import WheelMetadata, read_wheel

TRITON_VERSION_FILE = ".ci/docker/triton_version.txt"
_RELEASE = re.compile(r"^(?P<final>\d+\.\d+\.\d+)(?:[-.]?(?P<rc>rc\d+))?$")


@dataclass(frozen=True)
class Release:
    """A PyTorch release as the user typed it, in the spellings the recipe and upstream use."""

    final: str            # 2.14.0
    rc: str               # "rc1" or ""

    @classmethod
    def parse(cls, text: str) -> "Release":
        match = _RELEASE.match(text.strip().lstrip("v"))
        if not match:
            raise FeedstockError(f"version '{text}' is not a PyTorch release; write it like 2.14.0 or 2.14.0-rc1")
        return cls(match.group("final"), match.group("rc") or "")

    @property
    def upstream(self) -> str:
        """Tag and tarball spelling: 2.14.0-rc1 (the recipe's rc rule turns '-' into '.')."""
        return f"{self.final}-{self.rc}" if self.rc else self.final

    @property
    def tarball_top(self) -> str:
        return f"pytorch-v{self.upstream}"


def conda_version(recipe_version: str) -> Version:
    """The version conda sees for a recipe's ``version`` (rc rule: '-' becomes '.')."""
    try:
        return Version(recipe_version.replace("-", "."))
    except Exception as err:   # rattler raises its own InvalidVersionError
        raise FeedstockError(f"recipe version '{recipe_version}' is not a conda version ({err}); fix the recipe")


@dataclass
class BumpPlan:
    release: Release
    old_version: str
    sha256: str
    changes: dict[Path, tuple[str, str]] = field(default_factory=dict)   # path -> (old text, new text)
    notes: list[str] = field(default_factory=list)
    patches: list[PatchResult] = field(default_factory=list)
    hash_seconds: float = 0.0

    def diff(self, root: Path) -> str:
        out = []
        for path, (old, new) in self.changes.items():
            rel = path.relative_to(root)
            out += difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{rel}", tofile=f"b/{rel}")
        return "".join(out)


def fetch_source(source: str, scratch: Path) -> Path:
    """A local tarball as given, or a URL downloaded into ``scratch`` (only when reachable)."""
    if re.match(r"^https?://", source):
        target = scratch / (source.rstrip("/").rsplit("/", 1)[-1] or "source.tar.gz")
        try:
            with urllib.request.urlopen(source, timeout=60) as response, open(target, "wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", err)
            raise FeedstockError(f"cannot download {source} ({reason}); without network, download the tarball "
                                 "elsewhere and pass --source pytorch-vX.Y.Z.tar.gz")
        return target
    path = Path(source)
    if path.is_dir():
        raise FeedstockError(f"{path} is a directory; bump needs the release tarball (its sha256 goes into the "
                             "recipe): pass pytorch-vX.Y.Z.tar.gz or its URL")
    check_tarball(path)
    return path


def _source_pythons(source: SourceFiles) -> str | None:
    """``requires-python``'s lower bound from the source's pyproject.toml (3.10), if it says."""
    text = source.text("pyproject.toml")
    if not text or too_deep(text):  # a source tree's pyproject.toml only informs this note
        return None
    try:
        spec = str(tomllib.loads(text).get("project", {}).get("requires-python", ""))
    except tomllib.TOMLDecodeError:
        return None
    match = re.search(r">=\s*(3\.\d+)", spec)
    return match.group(1) if match else None


_PYTHON_ENTRY = re.compile(r"^[ \t]*-[ \t]+[\"']?(?P<minor>3\.\d+)(?:\.\*)?[^\n]*\n?", re.M)


def drop_pythons_below(pinning_text: str, minimum: str) -> tuple[str, list[str]]:
    """Remove the top-level ``python:`` entries older than ``minimum``, and the entries at the
    same places of the keys zipped with python (``is_freethreading``); other lines untouched."""
    block = _list_block(pinning_text, "python")
    if not block:
        return pinning_text, []
    floor = Version(minimum)
    removed: list[str] = []
    drop: set[int] = set()
    for index, line in enumerate(_entries(pinning_text[block[0]:block[1]])):
        entry = _PYTHON_ENTRY.match(line)
        if entry and Version(entry.group("minor")) < floor:
            removed.append(entry.group("minor"))
            drop.add(index)
    for key in ["python", *_zipped_with(pinning_text, "python")]:
        pinning_text = _drop_entries(pinning_text, key, drop)
    return pinning_text, removed


def _list_block(text: str, key: str) -> tuple[int, int] | None:
    """Where the entries of the top-level list ``key:`` are (start, end of its indented block)."""
    found = re.search(rf"^{re.escape(key)}:[ \t]*(#.*)?\n", text, re.M)
    if not found:
        return None
    end = re.search(r"^[^\s#-]", text[found.end():], re.M)
    return found.end(), found.end() + (end.start() if end else len(text) - found.end())


def _entries(block: str) -> list[str]:
    """The ``- value`` lines of a block, in order (comments and blank lines left out)."""
    return [line for line in block.splitlines(keepends=True) if re.match(r"^[ \t]*-[ \t]", line)]


def _drop_entries(text: str, key: str, drop: set[int]) -> str:
    block = _list_block(text, key)
    if not block or not drop:
        return text
    kept, index = [], 0
    for line in text[block[0]:block[1]].splitlines(keepends=True):
        if re.match(r"^[ \t]*-[ \t]", line):
            index += 1
            if index - 1 in drop:
                continue
        kept.append(line)
    return text[:block[0]] + "".join(kept) + text[block[1]:]


def _zipped_with(text: str, key: str) -> list[str]:
    """The other keys of ``key``'s zip_keys group in this pinning text."""
    groups = (load_yaml(text, "the pinning file") or {}).get("zip_keys") or []
    for group in groups:
        if isinstance(group, list) and key in group:
            return [k for k in group if k != key]
    return []


def pinned_pythons(pinning_text: str) -> list[str]:
    block = _list_block(pinning_text, "python")
    if not block:
        return []
    return [m.group("minor") for m in _PYTHON_ENTRY.finditer(pinning_text[block[0]:block[1]])]


def plan_bump(root: Path, version: str, source: str, wheel: Path | None = None, sha256: str | None = None,
              skip_patch_check: bool = False, scratch: Path | None = None, allow_older: bool = False) -> BumpPlan:
    """Compute the bump; raise FeedstockError (exit 2, or 1 for failing patches) if it is refused.

    ``allow_older`` lets the version move back or stay (a revert, or a copy for an older wheel)."""
    feedstock = load_feedstock(root)
    release = Release.parse(version)
    recipes = recipe_files(feedstock.recipe_dir)
    old_version = get_version(recipes[0])
    for recipe in recipes[1:]:
        if get_version(recipe) != old_version:
            raise FeedstockError(f"{recipe.label} has version {get_version(recipe)} but {recipes[0].label} has "
                                 f"{old_version}; make them agree first")
    if not allow_older and conda_version(release.upstream) <= conda_version(old_version):
        raise FeedstockError(f"version {release.upstream} is not newer than the recipe's {old_version}; "
                             "bump only moves forward (--allow-older to go back)")
    if release.rc:
        lacking = [r.label for r in recipes if not has_rc_rule(r)]
        if lacking:
            verb = "has" if len(lacking) == 1 else "have"
            raise FeedstockError(f"{', '.join(lacking)} {verb} no release-candidate rule ({{% if \"rc\" in version %}} "
                                 "source branch); add one or bump to a final release")
    with tempfile.TemporaryDirectory(prefix="feedstock-bump-") as tmp:
        tarball = fetch_source(source, Path(scratch or tmp))
        started = time.perf_counter()
        digest = sha256_of(tarball)
        hash_seconds = time.perf_counter() - started
        if sha256 and sha256.lower() != digest:
            raise FeedstockError(f"sha256 of {tarball.name} is {digest}, not the --sha256 given ({sha256}); "
                                 "download the tarball again")
        paths = patch_paths(feedstock)
        wanted = wanted_by_patches(feedstock, paths) | {TRITON_VERSION_FILE, "pyproject.toml"}
        tree = load_source(tarball, lambda rel: rel in wanted)
    if tree.top != release.tarball_top:
        raise FeedstockError(f"{tarball.name} unpacks into {tree.top}/, not {release.tarball_top}/; "
                             f"pass the tarball of PyTorch {release.upstream}")
    plan = BumpPlan(release=release, old_version=old_version, sha256=digest, hash_seconds=hash_seconds)
    if not skip_patch_check:
        plan.patches = check_series(feedstock, tree, paths)
        failing = [r for r in plan.patches if not r.applies]
        if failing:
            refused = FeedstockError(f"{len(failing)} of {len(paths)} patches do not apply to {tree.top} "
                                     f"(first: {failing[0].name}); nothing written; refresh them or pass "
                                     "--skip-patch-check", exit_code=1)
            refused.patch_results = plan.patches   # the command line prints each with its failing hunk
            raise refused
    metadata = read_wheel(wheel) if wheel else None
    _edit_recipes(plan, recipes, tree, metadata)
    _edit_pythons(plan, feedstock, tree, metadata)
    return plan


def _edit_recipes(plan: BumpPlan, recipes: list[RecipeText], tree: SourceFiles,
                  metadata: WheelMetadata | None) -> None:
    triton, triton_from = None, ""
    if (text := tree.text(TRITON_VERSION_FILE)) and text.strip():
        triton, triton_from = text.strip().splitlines()[0].strip(), TRITON_VERSION_FILE
    elif metadata and metadata.triton_version():
        triton, triton_from = metadata.triton_version(), f"{metadata.source} Requires-Dist"
    run_specs = {r.conda_name: r.conda_spec for r in metadata.runtime_requirements()} if metadata else {}
    for recipe in recipes:
        before = recipe.text
        set_version(recipe, plan.release.upstream)
        set_sha256(recipe, plan.sha256, release_candidate=bool(plan.release.rc))
        set_build_number(recipe, 0)
        if triton:
            old = get_triton(recipe)
            if set_triton(recipe, triton) and old != triton:
                plan.notes.append(f"{recipe.label}: triton {old} -> {triton} (from {triton_from})")
        if run_specs:
            missing = set_run_requirements(recipe, run_specs)
            for name in missing:
                plan.notes.append(f"{recipe.label}: the wheel requires {run_specs[name]}, which is not a run "
                                  "requirement of the recipe; add it by hand if conda-forge has it")
        if recipe.text != before:
            plan.changes[recipe.path] = (before, recipe.text)


def _edit_pythons(plan: BumpPlan, feedstock: Feedstock, tree: SourceFiles, metadata: WheelMetadata | None) -> None:
    pinning = feedstock.pinning_file
    minimum = (metadata.min_python() if metadata else None) or _source_pythons(tree)
    if not pinning or not minimum:
        return
    before = read_text(pinning, pinning.name)
    after, removed = drop_pythons_below(before, minimum)
    if removed:
        plan.changes[pinning] = (before, after)
        plan.notes.append(f"{pinning.name}: python {', '.join(removed)} dropped (the release requires >={minimum})")
    if metadata:
        pinned = set(pinned_pythons(after))
        newer = [p for p in metadata.classifier_pythons if p not in pinned and Version(p) > Version(minimum)]
        if newer:
            plan.notes.append(f"{pinning.name}: the wheel also lists Python {', '.join(newer)}; add it to the python "
                              "pins once conda-forge builds it")


def apply_bump(plan: BumpPlan, root: Path) -> bool:
    """Write the recipes (all at once); rerender .ci_support/ when what it reads changed.

    Returns whether .ci_support/ was rerendered.
    """
    replace_files({path: new for path, (_, new) in plan.changes.items()})
    from ..ci.rerender import check, rerender

    if check(root).clean:
        return False
    rerender(root)
    return True
