"""Before the slow part: a pip line that needs a host the pip steps cannot reach is one line,
not a git or pip failure minutes later in the build stage."""
from __future__ import annotations

import os
import re
import socket
from urllib.parse import urlsplit

from ...errors import FeedstockError
from .envfile import Line

URL = re.compile(r"(?:[a-z]+\+)?(https?|ssh|git)://\S+", re.IGNORECASE)
PORTS = {"https": 443, "http": 80, "ssh": 22, "git": 9418}
# a proxy decides what is reachable: then only pip can tell
PROXIES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "PIP_PROXY")


def reachable(line: Line, timeout: float = 5.0) -> None:
    """Refuse (exit 3) when the line's URL host does not resolve or does not answer."""
    match = URL.search(line.text)
    if not match or any(os.environ.get(name) for name in PROXIES):
        return
    url = urlsplit(match.group(0).split("+", 1)[-1] if "+" in match.group(0).split("://")[0] else match.group(0))
    host, port = url.hostname, url.port or PORTS.get(url.scheme.lower(), 443)
    if not host:
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        reason = "does not resolve" if isinstance(err, socket.gaierror) else (err.strerror or type(err).__name__)
        raise FeedstockError(f"{line.where}: {line.text!r} needs {host}:{port}, which this machine cannot "
                             f"reach ({reason}); fetch it where there is a network and give its sdist or "
                             "wheel with --find-links", exit_code=3) from None
