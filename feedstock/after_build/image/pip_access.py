"""How the pip steps reach a site's index: a certificate bundle (--pip-cert, or PIP_CERT) and the
PIP_* names pip already reads, handed to the containers that run pip, never written into them.

The bundle is bind-mounted read-only outside the tree that becomes a layer, and the names are
passed as `-e NAME` (podman takes the value from its own environment, so it is not on any
command line either). Only the names that say where and how to fetch are passed: one like
PIP_TARGET or PIP_USER would change where pip installs, which the image command decides.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ...errors import FeedstockError
from ...text_input import read_bytes

FORWARDED = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_PROXY", "PIP_TIMEOUT",
             "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_PRE")
# where the bundle appears in a pip container: outside /out, so never in a layer
CERT_MOUNT = "/run/feedstock/pip-cert.pem"


@dataclass(frozen=True)
class PipAccess:
    cert: Path | None = None
    names: tuple[str, ...] = field(default_factory=tuple)   # forwarded PIP_* names

    def podman_args(self) -> list[str]:
        args = [arg for name in self.names for arg in ("-e", name)]
        if self.cert is not None:
            args += ["-v", f"{self.cert}:{CERT_MOUNT}:ro", "-e", f"PIP_CERT={CERT_MOUNT}"]
        return args


def pip_access(cert: Path | None, environ: Mapping[str, str] = os.environ) -> PipAccess:
    """--pip-cert FILE wins over PIP_CERT; either must be a PEM bundle."""
    label = "--pip-cert" if cert is not None else "PIP_CERT"
    given = cert if cert is not None else (Path(environ["PIP_CERT"]) if environ.get("PIP_CERT") else None)
    if given is not None:
        try:
            data = read_bytes(given, f"{label} {given}")
        except FileNotFoundError:
            raise FeedstockError(f"{label} {given}: no such file") from None
        if b"-----BEGIN CERTIFICATE-----" not in data:
            raise FeedstockError(f"{label} {given}: not a PEM certificate bundle (no "
                                 "'-----BEGIN CERTIFICATE-----'); give the CA bundle your index needs")
        given = given.resolve()
    return PipAccess(given, tuple(name for name in FORWARDED if environ.get(name)))
