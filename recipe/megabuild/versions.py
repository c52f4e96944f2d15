"""Toolkit versions as the driver's tables key them (`12.9`, `7.2`), and the one error for a
version no table knows."""
from __future__ import annotations

from typing import Mapping

from .errors import MegabuildError


def major_minor(version: str) -> str:
    """`12.9.1` -> `12.9`: arch lists and switches change with the minor release, not the patch."""
    return ".".join(version.strip().split(".")[:2])


def known_major_minor(version: str, table: Mapping[str, object], toolkit: str, missing: str, fix: str) -> str:
    """The table key for ``version``, or one line naming the known versions and how to add one."""
    key = major_minor(version)
    if key not in table:
        raise MegabuildError(f"unknown {toolkit} version {version!r}: {missing}; "
                             f"known: {', '.join(sorted(table))} ({fix})")
    return key
