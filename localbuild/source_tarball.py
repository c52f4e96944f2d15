"""--source-tarball: the recipe's source fetched elsewhere, for build machines without network.

The recipe's source is one url plus its sha256 (recipe/meta.yaml for conda-build,
recipe/recipe.yaml for rattler-build). Given the file, build-locally checks its sha256 against
the recipe's before anything starts, and the build reads it instead of downloading:

- conda-build looks in its source cache before it downloads: ``<cache-dir>/src_cache/`` holding
  the url's file name with the sha256's first 10 digits before the extension
  (conda_build/source.py, download_to_cache / append_hash_to_fn), and checks the sha256 again.
  build_steps.sh copies the file there and passes ``--cache-dir``, so that an rc file's
  ``conda_build: cache_dir`` cannot move the cache away.
- rattler-build's cache (``<output-dir>/src_cache/``) finds an entry through a JSON index keyed
  by Rust's DefaultHasher of url and checksum (rattler_build_source_cache, 0.58 and later; before
  that ``<stem>_<sha256[:8]>``), a hash Rust leaves unspecified between releases, and keeps the
  extracted tree beside the archive. That cannot be seeded reliably, so rattler-build builds a
  derived copy of recipe/ in build_artifacts/localbuild/ whose first url is the file
  (``file://``; the sha256 stays and is checked again). The user's recipe is never touched.

Without the option, a build whose log shows the source download failing gets one line naming
the url, the sha256 and this option.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from common.hashing import sha256_of
from common.atomic_files import atomic_folder, atomic_symlink
from common.input_files import NotUtf8Text, decode_text, read_regular

from .errors import EXIT_USAGE, LocalBuildError
from .log_scan import log_mentions

RECIPE_FILES = {"conda-build": "meta.yaml", "rattler-build": "recipe.yaml"}
# what the tools print when the source download fails: rattler-build since its source cache
# crate (CacheError::Download), rattler-build before it (SourceError::Url), conda-build
# (download_to_cache's RuntimeError)
DOWNLOAD_FAILED = (b"Failed to download from URL:", b"Failed to download source from url:",
                   b"Could not download ")
_SOURCE_BLOCK = re.compile(r"^source:[ \t]*(#.*)?$")
# the value runs to a comment or the line's end; its trailing blanks are cut in _url_value (a
# lazy value before `[ \t]*` retried every length: 16 KB of trailing blanks took 4 s)
_URL = re.compile(r"^[ \t]+(?:-[ \t]+)?url:[ \t]*(?P<value>[^#]*)(#.*)?$")
_SHA256 = re.compile(r"^[ \t]+(?:-[ \t]+)?sha256:[ \t]*[\"']?(?P<value>[0-9a-fA-F]{64})[\"']?[ \t]*(#.*)?$")
_JINJA_VERSION = re.compile(r"^[ \t]*\{%-?\s*set\s+version\s*=\s*[\"'](?P<value>[^\"'\n]+)[\"']\s*-?%\}")
_CONTEXT_VERSION = re.compile(r"^[ \t]+version:[ \t]*[\"']?(?P<value>[^\"'\s#]+)[\"']?[ \t]*(#.*)?$")
_VERSION_EXPRESSION = re.compile(r"\$?\{\{\s*version\s*\}\}")


@dataclass(frozen=True)
class RecipeSource:
    """The one source url of a recipe, rendered with the recipe's version, and its sha256."""

    recipe: Path        # the recipe file it was read from
    label: str          # that file as the user knows it: recipe/meta.yaml
    url: str
    sha256: str
    url_line: int       # index of the url line in the recipe's lines (the derived copy's edit)

    @property
    def file_name(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]


def recipe_file(feedstock_root: Path, tool: str) -> Path:
    return feedstock_root / "recipe" / RECIPE_FILES[tool]


def read_recipe_lines(recipe: Path, label: str) -> list[str]:
    """The recipe's lines (a BOM and CRLF line ends allowed); one error line if unreadable."""
    try:
        data = read_regular(recipe)
    except OSError as exc:
        raise LocalBuildError(f"--source-tarball: cannot read {label} ({exc.strerror}); restore "
                              f"it (git checkout {label})", EXIT_USAGE) from None
    try:
        return decode_text(data, label).splitlines()
    except NotUtf8Text as exc:
        raise LocalBuildError(f"--source-tarball: {exc}; fix the recipe", EXIT_USAGE) from None


def read_recipe_source(recipe: Path, label: str) -> RecipeSource:
    """The url and sha256 under the recipe's top-level ``source:``; one error line when the
    recipe has not exactly one of each, or a url that needs more than the version to render."""
    lines = read_recipe_lines(recipe, label)
    block = _source_block(lines)
    urls = [(i, lines[i][span[0]:span[1]]) for i in block for span in [_url_value(lines[i])] if span]
    hashes = [m.group("value").lower() for i in block for m in [_SHA256.match(lines[i])] if m]
    if len(urls) != 1 or len(hashes) != 1:
        found = f"{len(urls)} url and {len(hashes)} sha256 lines"
        raise LocalBuildError(f"--source-tarball: {label} has {found} under its top-level "
                              "source:; --source-tarball needs exactly one of each", EXIT_USAGE)
    index, raw = urls[0]
    url = _VERSION_EXPRESSION.sub(_recipe_version(lines, label), _unquote(raw))
    if "{{" in url or "{%" in url:
        raise LocalBuildError(f"--source-tarball: the source url in {label} ({raw}) needs more than "
                              "the version to render; write it with only ${{ version }}", EXIT_USAGE)
    return RecipeSource(recipe, label, url, hashes[0], index)


def _url_value(line: str) -> tuple[int, int] | None:
    """Where the value of a ``url:`` line is (without blanks or a comment); None for other lines."""
    match = _URL.match(line)
    if match is None:
        return None
    start = match.start("value")
    return start, start + len(match.group("value").rstrip(" \t"))


def _source_block(lines: list[str]) -> range:
    """Indices of the lines of the top-level ``source:`` block (empty range if none)."""
    start = next((i + 1 for i, line in enumerate(lines) if _SOURCE_BLOCK.match(line)), len(lines))
    end = start
    while end < len(lines) and (not lines[end].strip() or lines[end][:1] in " \t#"):
        end += 1
    return range(start, end)


def recipe_version(recipe: Path, label: str) -> str:
    """The version the recipe builds (its `set version` or `context: version:`)."""
    return _recipe_version(read_recipe_lines(recipe, label), label)


def _recipe_version(lines: list[str], label: str) -> str:
    """``{% set version = "X" %}`` (meta.yaml) or ``context: version: X`` (recipe.yaml)."""
    for line in lines:
        match = _JINJA_VERSION.match(line)
        if match:
            return match.group("value")
    in_context = False
    for line in lines:
        if line[:1] not in " \t#" and line.strip():
            in_context = line.startswith("context:")
        elif in_context:
            match = _CONTEXT_VERSION.match(line)
            if match:
                return match.group("value")
    raise LocalBuildError(f"--source-tarball: {label} sets no version ({{% set version = ... %}} "
                          "or context: version:) to render its source url with", EXIT_USAGE)


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) > 1 and value[0] in "\"'" and value[-1] == value[0] else value


def tarball_path(value: str) -> Path:
    """--source-tarball FILE made absolute (links kept: docker mounts what they point to)."""
    if not value.strip():
        raise LocalBuildError("--source-tarball '': give the path of the tarball", EXIT_USAGE)
    return Path(os.path.abspath(os.path.expanduser(value)))


def check_tarball(tarball: Path, sources: list[RecipeSource]) -> None:
    """The file exists, is readable and has the sha256 every recipe in ``sources`` names."""
    if not sources:
        return
    wanted = sources[0]
    where = f"{wanted.file_name} from {wanted.url}"
    if tarball.is_dir():
        raise LocalBuildError(f"--source-tarball {tarball} is a folder; give the tarball itself "
                              f"({where})", EXIT_USAGE)
    if not os.path.lexists(tarball):
        raise LocalBuildError(f"--source-tarball {tarball}: no such file; fetch {where} where "
                              "the network reaches and give its path", EXIT_USAGE)
    try:
        found = sha256_of(tarball)
    except OSError as exc:
        raise LocalBuildError(f"--source-tarball {tarball}: cannot read it ({exc.strerror}); give "
                              f"a readable copy of {where}", EXIT_USAGE) from None
    for source in sources:
        if found != source.sha256:
            raise LocalBuildError(
                f"--source-tarball {tarball} has sha256 {found}, but {source.label} wants "
                f"{source.sha256} ({source.url}); fetch that file again (an interrupted download, "
                "or another version?)", EXIT_USAGE)


def conda_build_cache_name(source: RecipeSource) -> str:
    """The name conda-build gives the url's file in its src_cache: the sha256's first 10 digits
    before the extension (``.tar.gz`` counts as one)."""
    # found from the last dot, not by a pattern (a lazy prefix retried every start: quadratic)
    name = source.file_name
    dot = name.rfind(".")
    if dot < 0 or dot == len(name) - 1:
        return name
    if name[:dot].endswith(".tar"):
        dot -= len(".tar")
    return f"{name[:dot]}_{source.sha256[:10]}{name[dot:]}"


def derived_recipe_text(source: RecipeSource, file_url: str) -> str:
    """The recipe's text with ``file_url`` as its source's first url and the recipe's own as the
    second, a mirror never reached (rattler-build tries them in order; the packages' info/recipe
    keep the real one). The rest stays byte for byte, the sha256 too: the tool checks the file
    once more."""
    lines = read_recipe_lines(source.recipe, source.label)
    line = lines[source.url_line]
    span = _url_value(line)
    assert span is not None  # the line read_recipe_source found
    own = line[span[0]:span[1]]
    own = own if own[:1] in "\"'" else json.dumps(own)   # `{` of ${{ version }} is flow syntax
    urls = f"[{json.dumps(file_url)}, {own}]"
    lines[source.url_line] = line[:span[0]] + urls + line[span[1]:]
    return "\n".join(lines) + "\n"


def download_failed(log: Path) -> bool:
    """Whether the build's log says the tool could not download the recipe's source."""
    return log_mentions(log, DOWNLOAD_FAILED)


def download_hint(source: RecipeSource) -> str:
    return (f"source {source.url} (sha256 {source.sha256}) could not be downloaded; fetch it where "
            "the network reaches and pass --source-tarball FILE")


def download_failure_detail(log: Path, recipe: Path, label: str) -> str | None:
    """The one line for a build that failed downloading its source (None: it did not, or the
    recipe's source cannot be read to name it)."""
    if not download_failed(log):
        return None
    try:
        return download_hint(read_recipe_source(recipe, label))
    except LocalBuildError:
        return None


def link_tarball(link: Path, tarball: Path) -> None:
    """``link`` (named as the url's file) pointing at the tarball; replaced in one step, so
    Slurm tasks that make the same link at once never see it missing."""
    atomic_symlink(link, tarball)


def write_recipe_copy(recipe_dir: Path, dest: Path, recipe_text: str, recipe_name: str) -> None:
    """``dest``: a copy of recipe_dir (patches, scripts) whose ``recipe_name`` is recipe_text;
    the previous copy is replaced whole (the user may have edited recipe/ since)."""
    import shutil

    with atomic_folder(dest) as tmp:
        shutil.copytree(recipe_dir, tmp, ignore=shutil.ignore_patterns("__pycache__", "output"),
                        dirs_exist_ok=True)
        (tmp / recipe_name).write_text(recipe_text, encoding="utf-8")
