"""--channel: build against given channels instead of the config's channel_sources.

Sites with their own mirror of conda-forge (or no network at all) name it here. A value is a
channel name or URL, passed as written, or a local folder holding an indexed channel, which a
container gets mounted read-only at the same path, so the one path is right on both sides.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import EXIT_USAGE, LocalBuildError
from common.input_files import read_regular
from common.nesting import MAX_DEPTH, too_deep
from common.path_kinds import file_url_path, folder_problem


def is_local(value: str) -> bool:
    return value.startswith(("/", ".", "~", "file://")) or Path(value).is_dir()


def parse_channels(values: list[str] | None) -> tuple[str, ...]:
    """The --channel values in order, local folders made absolute and checked."""
    channels: list[str] = []
    for value in values or []:
        value = value.strip()
        control = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
        if control is not None:
            # a newline would cut the path in the build script's mount line
            raise LocalBuildError(f"--channel {value!r}: has a control character ({control!r}); give a "
                                  "channel name, a URL or a folder whose path has none", EXIT_USAGE)
        if not value or "," in value:
            raise LocalBuildError(f"--channel {value!r}: give one channel per --channel "
                                  "(a name, a URL or a local folder)", EXIT_USAGE)
        if not is_local(value) and any(c.isspace() for c in value):
            raise LocalBuildError(f"--channel {value!r}: a channel name or URL has no spaces; give "
                                  "a name (conda-forge), a URL or a local folder", EXIT_USAGE)
        if is_local(value):
            folder = local_path(value)
            problem = folder_problem(folder)
            if problem:
                raise LocalBuildError(f"--channel {value}: {problem}; give an indexed "
                                      "local channel, a channel name or a URL", EXIT_USAGE)
            if not any(folder.glob("*/repodata.json")):
                raise LocalBuildError(f"--channel {folder}: not an indexed channel (no "
                                      "<subdir>/repodata.json); index it first, e.g. `python "
                                      f"localbuild/in_container/rattler_build_py.py index {folder}`", EXIT_USAGE)
            for repodata in sorted(folder.glob("*/repodata.json")):
                _check_repodata(repodata)
            value = str(folder)
        if value not in channels:
            channels.append(value)
    return tuple(channels)


def local_path(value: str) -> Path:
    """A folder, or a file:// URL of one as Path.as_uri() writes it (%20 for a space)."""
    if value.startswith("file://"):
        return Path(os.path.realpath(file_url_path(value)))
    return Path(os.path.realpath(Path(value).expanduser()))   # a symlink loop stays itself, for the check


def _check_repodata(path: Path) -> None:
    """A local channel's index is read by the solver inside the container: a broken one is
    refused here, naming the file, not after the image is pulled."""
    try:
        text = read_regular(path).decode("utf-8")
        if too_deep(text):
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc).splitlines()[0][:120]
        raise LocalBuildError(f"--channel: {path} is not a readable repodata.json ({reason}); "
                              f"index the channel again: python localbuild/in_container/rattler_build_py.py "
                              f"index {path.parent.parent}", EXIT_USAGE) from None
    if not isinstance(data, dict):
        raise LocalBuildError(f"--channel: {path} is not a repodata.json (not a JSON object); index "
                              "the channel again", EXIT_USAGE)


def local_folders(channels: tuple[str, ...]) -> list[Path]:
    return [Path(channel) for channel in channels if channel.startswith("/")]
