"""What the app's pip lines ask for (a --requirements file or an environment file's pip:
section), checked before anything is built.

torch is already installed by conda: a line that names torch with a version the environment
does not have (or from a URL or a path) would replace it, so it is refused naming the line.
Then the lines are split between the two pip steps: a requirement marked `--no-build-isolation`
(the flag pip users already give for packages that build against the installed torch) or one
from a VCS URL (git is only there) is built into a wheel in the build stage; everything else is
installed by pip in the image.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from common.suggest import did_you_mean

from ...errors import FeedstockError
from ...text_input import read_text
from .envfile import Line

TORCH_NAMES = {"torch", "pytorch"}
# pip's command-line flag, which pip does not accept in a requirements file: our mark for the
# build stage (pip's per-requirement options are only --hash, --config-settings, --global-option)
MARK = "--no-build-isolation"
VCS = re.compile(r"(^|@\s*)(git|hg|svn|bzr)\+", re.IGNORECASE)
NESTED = re.compile(r"^-(r|c|e)\b|^--(requirement|constraint|editable)\b")
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _accepts(specifier: str, version: str) -> bool:
    """Whether `torch<specifier>` holds for the installed version."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False


@dataclass(frozen=True)
class BuildItem:
    where: str
    requirement: str   # the line without our mark; pip's own per-requirement options kept
    isolated: bool     # False: marked, built against the image's own torch


@dataclass
class PipPlan:
    options: list[str] = field(default_factory=list)     # option lines: both pip steps get them
    runtime: list[Line] = field(default_factory=list)    # installed by pip in the image
    build: list[BuildItem] = field(default_factory=list)  # built into wheels in the build stage

    def network_lines(self) -> list[Line]:
        """Requirements that can only come from the network (a URL, a VCS checkout)."""
        lines = self.runtime + [Line(item.where, item.requirement) for item in self.build]
        return [line for line in lines if VCS.search(line.text) or re.search(r"\bhttps?://", line.text)]


def _content(raw: str) -> str:
    return raw.split(" #", 1)[0].strip()


def read_requirements(path: Path) -> list[Line]:
    """A requirements file's lines, each with its file:line."""
    try:
        text = read_text(path, f"--requirements {path}")
    except FileNotFoundError:
        raise FeedstockError(f"--requirements {path}: no such file") from None
    except OSError as err:
        raise FeedstockError(f"--requirements {path}: {err.strerror}") from None
    return [Line(f"{path}:{number}", raw) for number, raw in enumerate(text.splitlines(), 1)]


def check_lines(lines: list[Line], torch_version: str) -> None:
    """Refused when a line would install a torch other than the image's, or cannot be checked."""
    for line in lines:
        text = _content(line.text)
        if not text or text.startswith("#"):
            continue
        if text.startswith("-"):
            if NESTED.match(text):
                raise FeedstockError(f"{line.where}: {text!r}: nested or editable requirements "
                                     "cannot be checked for torch; list them in this file")
            continue
        match = NAME.match(text)
        if not match or _canonical(match.group(1)) not in TORCH_NAMES:
            continue
        # pip's per-requirement options (--hash=...) follow the specifier
        specifier = re.split(r"\s-", match.group(3), maxsplit=1)[0].split(";", 1)[0].strip()
        if specifier.startswith("@") or not _accepts(specifier, torch_version):
            raise FeedstockError(f"{line.where}: {text!r} would replace the image's torch "
                                 f"{torch_version}; drop the line or accept {torch_version}")


def check_requirements(path: Path, torch_version: str) -> list[str]:
    """The file's lines; refused when a line would install a torch other than the image's."""
    lines = read_requirements(path)
    check_lines(lines, torch_version)
    return [line.text for line in lines]


def plan(lines: list[Line]) -> PipPlan:
    """Split the lines between the runtime pip step and the build stage."""
    result = PipPlan()
    mark_all = any(_content(line.text) == MARK for line in lines)
    for line in lines:
        text = _content(line.text)
        if not text or text.startswith("#") or text == MARK:
            continue
        if text.startswith("-"):
            result.options.append(text)
            continue
        tokens = text.split()
        marked = mark_all or MARK in tokens
        requirement = " ".join(token for token in tokens if token != MARK)
        if marked or VCS.search(requirement):
            result.build.append(BuildItem(line.where, requirement, isolated=not marked))
        else:
            result.runtime.append(Line(line.where, requirement))
    return result


def distribution_name(filename: str) -> str | None:
    """The project of a wheel or sdist file name, canonical; None for other files."""
    if filename.endswith(".whl"):
        return _canonical(filename.split("-", 1)[0])
    for suffix in (".tar.gz", ".zip", ".tar.bz2", ".tgz"):
        if filename.endswith(suffix) and "-" in filename:
            return _canonical(filename[:-len(suffix)].rsplit("-", 1)[0])
    return None


def check_names_in_links(pips: PipPlan, links: Path, installed: set[str]) -> None:
    """With --find-links, a named requirement that neither the folder nor the solved conda
    environment has is refused now, naming its line (pip found out after the environment was
    installed, a minute in). URLs and VCS lines are other checks' business."""
    found = {name for name in (distribution_name(p.name) for p in links.iterdir()) if name}
    have = found | {_canonical(name) for name in installed} | TORCH_NAMES
    for line in [*pips.runtime, *(Line(item.where, item.requirement) for item in pips.build)]:
        match = NAME.match(line.text)
        if not match or VCS.search(line.text) or re.search(r"\bhttps?://|@", match.group(3)):
            continue
        name = _canonical(match.group(1))
        if name in have:
            continue
        raise FeedstockError(f"{line.where}: {line.text!r}: --find-links {links} has no wheel or sdist of "
                             f"{match.group(1)}, nor does the conda environment; "
                             + (did_you_mean(name, sorted(found)) or "put its wheel or sdist there"))
