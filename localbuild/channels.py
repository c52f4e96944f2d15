"""--channel: build against given channels instead of the config's channel_sources.

Sites with their own mirror of conda-forge (or no network at all) name it here. A value is a
channel name or URL, passed as written, or a local folder holding an indexed channel, which a
container gets mounted read-only at the same path, so the one path is right on both sides.
"""
from __future__ import annotations

from pathlib import Path

from .errors import EXIT_USAGE, LocalBuildError


def is_local(value: str) -> bool:
    return value.startswith(("/", ".", "~", "file://")) or Path(value).is_dir()


def parse_channels(values: list[str] | None) -> tuple[str, ...]:
    """The --channel values in order, local folders made absolute and checked."""
    channels: list[str] = []
    for value in values or []:
        value = value.strip()
        if not value or "," in value:
            raise LocalBuildError(f"--channel {value!r}: give one channel per --channel "
                                  "(a name, a URL or a local folder)", EXIT_USAGE)
        if is_local(value):
            folder = Path(value.removeprefix("file://")).expanduser().resolve()
            if not folder.is_dir():
                raise LocalBuildError(f"--channel {value}: no such folder; give an indexed "
                                      "local channel, a channel name or a URL", EXIT_USAGE)
            if not any(folder.glob("*/repodata.json")):
                raise LocalBuildError(f"--channel {folder}: not an indexed channel (no "
                                      "<subdir>/repodata.json); index it first, e.g. `python "
                                      f"localbuild/in_container/rattler_build_py.py index {folder}`", EXIT_USAGE)
            value = str(folder)
        if value not in channels:
            channels.append(value)
    return tuple(channels)


def local_folders(channels: tuple[str, ...]) -> list[Path]:
    return [Path(channel) for channel in channels if channel.startswith("/")]
