"""Targeted line edits of the recipes (``meta.yaml`` and the v1 ``recipe.yaml``).

Every edit replaces the value on one known line and keeps every other byte (comments, order,
selectors, Jinja), because maintainers review bumps as diffs. A line that is not where the
edit expects it is an error, never a guess.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import FeedstockError
from ...text_input import read_text

META = "meta.yaml"
V1 = "recipe.yaml"


@dataclass
class RecipeText:
    path: Path
    text: str

    @property
    def kind(self) -> str:
        return V1 if self.path.name == V1 else META

    @property
    def label(self) -> str:
        return f"recipe/{self.path.name}"


def recipe_files(recipe_dir: Path) -> list[RecipeText]:
    """Every recipe the feedstock has: meta.yaml always, recipe.yaml when it exists."""
    found = []
    for name in (META, V1):
        path = recipe_dir / name
        if os.path.lexists(path):
            found.append(RecipeText(path, read_text(path, f"recipe/{name}")))
    if not found:
        raise FeedstockError(f"no recipe in {recipe_dir} (neither meta.yaml nor recipe.yaml)")
    return found


# --- scalar values: version, build number, triton ------------------------------------------------

def _jinja_set(name: str, value_pattern: str) -> re.Pattern:
    return re.compile(r"^(?P<head>[ \t]*\{%-?\s*set\s+" + name + r"\s*=\s*)(?P<value>" + value_pattern
                      + r")(?P<tail>\s*-?%\})", re.M)


def _context_key(name: str, value_pattern: str) -> re.Pattern:
    # a key of the v1 recipe's top-level ``context:`` block (indented one level)
    return re.compile(r"^(?P<head>[ \t]+" + name + r":[ \t]*)(?P<value>" + value_pattern + r")(?P<tail>[ \t]*(#.*)?)$",
                      re.M)


_QUOTED = r"\"[^\"\n]*\"|'[^'\n]*'"
_QUOTED_OR_BARE = _QUOTED + r"|[0-9][^\s#'\"]*"


def _context_span(text: str) -> tuple[int, int]:
    """Where the v1 recipe's ``context:`` block is (start, end) in ``text``; (0, 0) if none."""
    match = re.search(r"^context:[ \t]*(#.*)?\n", text, re.M)
    if not match:
        return 0, 0
    end = re.search(r"^[^\s#]", text[match.end():], re.M)
    return match.end(), match.end() + end.start() if end else len(text)


def _find(recipe: RecipeText, meta_pattern: re.Pattern, v1_pattern: re.Pattern) -> re.Match | None:
    if recipe.kind == META:
        return meta_pattern.search(recipe.text)
    start, end = _context_span(recipe.text)
    return v1_pattern.search(recipe.text, start, end) if end else None


def _unquote(value: str) -> str:
    return value[1:-1] if value[:1] in "\"'" and value[-1:] == value[:1] else value


def _requote(old: str, new: str) -> str:
    return f"{old[0]}{new}{old[0]}" if old[:1] in "\"'" else new


def _replace_match(text: str, match: re.Match, new_value: str) -> str:
    return text[:match.start("value")] + new_value + text[match.end("value"):]


_VERSION = (_jinja_set("version", _QUOTED), _context_key("version", _QUOTED_OR_BARE))
_BUILD = (_jinja_set("(?:build|build_number|buildnumber)", r"\d+"),
          _context_key("(?:build|build_number|buildnumber|build_base)", r"\d+"))
_TRITON = (_jinja_set("triton", _QUOTED), _context_key("triton", _QUOTED_OR_BARE))


def get_version(recipe: RecipeText) -> str:
    match = _find(recipe, *_VERSION)
    if not match:
        where = "{% set version = \"...\" %}" if recipe.kind == META else "context: version: ..."
        raise FeedstockError(f"{recipe.label}: no `{where}` line; bump edits only that line, add it")
    return _unquote(match.group("value"))


def set_version(recipe: RecipeText, version: str) -> None:
    get_version(recipe)   # the error if the line is missing
    match = _find(recipe, *_VERSION)
    recipe.text = _replace_match(recipe.text, match, _requote(match.group("value"), version))


def set_build_number(recipe: RecipeText, number: int) -> None:
    """The ``{% set build = N %}`` / ``context: build_number: N`` line, or a literal ``number: N``."""
    match = _find(recipe, *_BUILD)
    if match:
        recipe.text = _replace_match(recipe.text, match, str(number))
        return
    literal = re.search(r"^(?P<head>[ \t]+number:[ \t]*)(?P<value>\d+)(?P<tail>[ \t]*(#.*)?)$", recipe.text, re.M)
    if not literal:
        raise FeedstockError(f"{recipe.label}: no build number line (`{{% set build = N %}}`, "
                             "`context: build_number: N` (or `build_base: N`) or `number: N`); add one")
    recipe.text = _replace_match(recipe.text, literal, str(number))


def get_triton(recipe: RecipeText) -> str | None:
    match = _find(recipe, *_TRITON)
    return _unquote(match.group("value")) if match else None


def set_triton(recipe: RecipeText, version: str) -> bool:
    """Set the triton pin; False when the recipe has none (nothing to follow)."""
    match = _find(recipe, *_TRITON)
    if not match:
        return False
    recipe.text = _replace_match(recipe.text, match, _requote(match.group("value"), version))
    return True


# --- source: sha256 and the rc rule ---------------------------------------------------------------

_SHA_LINE = re.compile(r"^(?P<head>[ \t]*(?:-[ \t]+)?sha256:[ \t]*)(?P<value>[\"']?[0-9a-fA-F]{64}[\"']?)"
                       r"(?P<tail>[ \t]*(#.*)?)$", re.M)
_RC_IF = re.compile(r"\{%-?\s*if\s+[\"']rc[\"']\s+in\s+version|if:\s*[\"']?.*[\"']rc[\"']\s+in\s+version")
_BRANCH_END = re.compile(r"\{%-?\s*(else|elif|endif)\b|^\s*else:", re.M)


def has_rc_rule(recipe: RecipeText) -> bool:
    """Whether the recipe spells a release candidate differently (``"rc" in version`` branch)."""
    return bool(_RC_IF.search(recipe.text))


def set_sha256(recipe: RecipeText, sha256: str, release_candidate: bool) -> None:
    """The source's sha256. With an rc branch, the line inside (rc) or outside (final) it."""
    candidates = []
    in_rc = False
    offset = 0
    for line in recipe.text.splitlines(keepends=True):
        if _RC_IF.search(line):
            in_rc = True
        elif _BRANCH_END.search(line):
            in_rc = False
        match = _SHA_LINE.match(line)
        if match:
            candidates.append((in_rc, offset, match))
        offset += len(line)
    if not candidates:
        raise FeedstockError(f"{recipe.label}: no `sha256: <64 hex digits>` line under source; add one")
    chosen = [c for c in candidates if c[0] == release_candidate] if has_rc_rule(recipe) else candidates
    if len(chosen) != 1:
        raise FeedstockError(f"{recipe.label}: {len(chosen)} source sha256 lines match; bump edits exactly one "
                             "(one source, or one per rc/final branch)")
    _, start, match = chosen[0]
    old = match.group("value")
    new = _requote(old, sha256) if old[:1] in "\"'" else sha256
    recipe.text = recipe.text[:start + match.start("value")] + new + recipe.text[start + match.end("value"):]


# --- run requirements that follow the wheel -------------------------------------------------------

_REQ_LINE = re.compile(r"^(?P<lead>[ \t]*-[ \t]+)(?P<name>[A-Za-z0-9_][A-Za-z0-9_.-]*)(?P<spec>[^#\n]*?)"
                       r"(?P<gap>[ \t]*)(?P<comment>#.*)?$")
_KEY_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>[A-Za-z_][\w-]*):")
_V1_BRANCH_KEYS = {"then", "else", "if"}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _parent_key(lines: list[str], index: int) -> str | None:
    """The mapping key a list item at ``lines[index]`` belongs to (v1 if/then/else looked through)."""
    level = _indent(lines[index])
    for back in range(index - 1, -1, -1):
        line = lines[back]
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "{%")):
            continue
        if _indent(line) < level or (_indent(line) == level and not stripped.startswith("-")):
            match = _KEY_LINE.match(line)
            if not match:
                return None
            if match.group("key") in _V1_BRANCH_KEYS:
                level = _indent(line)
                continue
            return match.group("key")
    return None


def set_run_requirements(recipe: RecipeText, specs: dict[str, str]) -> list[str]:
    """Rewrite each ``- NAME ...`` run requirement named in ``specs`` (conda name -> ``name >=x``).

    Returns the names the recipe has no run requirement for (the caller reports them). A trailing
    comment keeps its column where the new text fits.
    """
    lines = recipe.text.splitlines(keepends=True)
    seen: set[str] = set()
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        match = _REQ_LINE.match(body)
        if not match or match.group("name") not in specs or "{{" in match.group("spec"):
            continue
        if _parent_key(lines, index) != "run":
            continue
        name = match.group("name")
        seen.add(name)
        new_body = match.group("lead") + specs[name]
        if match.group("comment"):
            column = match.start("comment")
            new_body = new_body.ljust(column - 1) + " " + match.group("comment")
        if new_body != body:
            lines[index] = new_body + line[len(body):]
    recipe.text = "".join(lines)
    return sorted(set(specs) - seen)


# --- the patch list ------------------------------------------------------------------------------

@dataclass
class PatchEntry:
    path: str            # as written, relative to the recipe folder (patches/0001-x.patch)
    lines: list[str]     # the comment lines above it and the item line itself, as in the file


_PATCHES_KEY = re.compile(r"^(?P<indent>[ \t]*)patches:[ \t]*(#.*)?$")
_PATCH_ITEM = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+(?P<path>[^\s#]+)")


def _patch_block(text: str) -> tuple[int, int, list[PatchEntry], list[str]] | None:
    """(first line, end line, entries, trailing comment lines) of the first ``patches:`` list."""
    lines = text.splitlines(keepends=True)
    for start, line in enumerate(lines):
        key = _PATCHES_KEY.match(line.rstrip("\r\n"))
        if not key:
            continue
        entries: list[PatchEntry] = []
        pending: list[str] = []
        end = start + 1
        for cursor in range(start + 1, len(lines)):
            body = lines[cursor].rstrip("\r\n")
            stripped = body.strip()
            if stripped.startswith("#") and _indent(body) >= len(key.group("indent")):
                pending.append(lines[cursor])
                continue
            item = _PATCH_ITEM.match(body)
            if item and len(item.group("indent")) >= len(key.group("indent")) and "if:" not in body:
                entries.append(PatchEntry(item.group("path").strip("\"'"), pending + [lines[cursor]]))
                pending = []
                end = cursor + 1
                continue
            break
        return start + 1, end, entries, pending
    return None


def patch_list(recipe: RecipeText) -> list[str]:
    """The patches in recipe order (paths relative to the recipe folder)."""
    block = _patch_block(recipe.text)
    return [entry.path for entry in block[2]] if block else []


def replace_patch_list(recipe: RecipeText, paths: list[str]) -> None:
    """Make the patch list ``paths``, keeping each kept entry's comments and selector."""
    block = _patch_block(recipe.text)
    if block is None:
        raise FeedstockError(f"{recipe.label}: no `patches:` list under source; add one with the first patch")
    first, end, entries, _ = block
    if not entries:
        raise FeedstockError(f"{recipe.label}: the `patches:` list is empty; add the first patch by hand")
    lines = recipe.text.splitlines(keepends=True)
    old = {entry.path: entry for entry in entries}
    template = entries[-1].lines[-1]
    item = _PATCH_ITEM.match(template)
    newline = template[len(template.rstrip("\r\n")):] or "\n"
    new_lines: list[str] = []
    for path in paths:
        if path in old:
            new_lines += old[path].lines
        else:
            new_lines.append(f"{item.group('indent')}- {path}{newline}")
    recipe.text = "".join(lines[:first] + new_lines + lines[end:])


def run_requirements(recipe: RecipeText) -> dict[str, str]:
    """Run requirements with literal specs, name -> the line's ``name spec`` (first one wins)."""
    lines = recipe.text.splitlines()
    found: dict[str, str] = {}
    for index, line in enumerate(lines):
        match = _REQ_LINE.match(line)
        if not match or "{{" in line or match.group("name") in found:
            continue
        if _parent_key(lines, index) == "run":
            found[match.group("name")] = (match.group("name") + match.group("spec")).strip()
    return found
