"""The external programs the image command runs: found first, their failures one line."""
from __future__ import annotations

import shutil
import subprocess

from ...errors import FeedstockError

# tool -> the Debian package that ships it
PACKAGES = {"umoci": "umoci", "skopeo": "skopeo", "mmdebstrap": "mmdebstrap", "podman": "podman",
            "docker": "docker.io"}


def require(*tools: str) -> None:
    """Refuse, before anything is written, when a tool is not on PATH."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        packages = " ".join(PACKAGES.get(tool, tool) for tool in missing)
        raise FeedstockError(f"{', '.join(missing)} not found; install {'it' if len(missing) == 1 else 'them'} "
                             f"(apt-get install {packages})",
                             exit_code=3)


def run(command: list[str], what: str, env: dict[str, str] | None = None,
        timeout: float = 3600) -> str:
    """Run; on failure raise with the tool's last words. Returns stdout."""
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip())[-400:]
        raise FeedstockError(f"{what} failed ({command[0]} exit {proc.returncode}): {tail}", exit_code=1)
    return proc.stdout
