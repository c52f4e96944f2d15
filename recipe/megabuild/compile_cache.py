"""The shared compile cache: ccache, switched on by FEEDSTOCK_COMPILE_CACHE (a URL or a folder).

Why ccache (not sccache): measured on tests/support/megabuild_project (benchmarks/bench_compile_cache.py,
--tool sccache for the other): with Redis, ccache 4.7 gave machine B 30/30 hits and the BLAS
sibling exactly its 3 BLAS compiles; sccache 0.16 gave 37/39 and 5, wrote slower (1.21x vs
1.03x the uncached build) and needs a server process per build. ccache's `base_dir` makes every
path below the build folder relative, so conda-build's timestamped work folders and another
machine's paths hash alike. ccache wraps gcc/g++, nvcc and hipcc (HIP) alike.

    FEEDSTOCK_COMPILE_CACHE=redis://host:6379[/db]   remote (ccache remote_storage), no local copy
    FEEDSTOCK_COMPILE_CACHE=http://host/path         remote over HTTP (bazel-remote, nginx WebDAV)
    FEEDSTOCK_COMPILE_CACHE=/shared/ccache           a folder (local disk or NFS shared by machines)
    FEEDSTOCK_COMPILE_CACHE_PASSWORD                 the Redis/HTTP password, never part of the URL
    FEEDSTOCK_COMPILE_CACHE_READ_ONLY=1              use hits, store nothing (pull-request builds)
    CCACHE_DIR=/dir                                  the older spelling of a folder cache

What makes hits survive other absolute paths: `base_dir` = the common parent of SRC_DIR, PREFIX
and BUILD_PREFIX (conda-build's `<croot>/<pkg>_<timestamp>`), `hash_dir=false`, and
`compiler_check=content` (a compiler unpacked on another machine has another mtime).
ccache hashes only the new half of -fdebug-prefix-map, so conda-build's flags do not spoil it.

A remote cache that does not answer is one warning line; the build goes on without the cache.
Each driver step ends with one statistics line (hits, misses, uncacheable) read from ccache's
own stats log (CCACHE_STATSLOG, one per build folder; a step reads what it appended).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping
from urllib.parse import urlsplit, urlunsplit

from . import log
from .errors import MegabuildError

CACHE_VARIABLE = "FEEDSTOCK_COMPILE_CACHE"
PASSWORD_VARIABLE = "FEEDSTOCK_COMPILE_CACHE_PASSWORD"
READ_ONLY_VARIABLE = "FEEDSTOCK_COMPILE_CACHE_READ_ONLY"
LEGACY_DIR_VARIABLE = "CCACHE_DIR"
STATS_LOG_VARIABLE = "CCACHE_STATSLOG"
LANGUAGES = ("C", "CXX", "CUDA", "HIP")
REMOTE_SCHEMES = {"redis": 6379, "http": 80}
PROBE_TIMEOUT_S = 3.0
# ccache's stats-log counters that mean "served from the cache" / "compiled"
HIT_COUNTERS = ("direct_cache_hit", "preprocessed_cache_hit")
MISS_COUNTERS = ("cache_miss",)

STATS_LOG_NAME = "ccache-stats.log"

_probed: dict[tuple[str, str], str | None] = {}  # (location, password) -> problem; once per process
reports: list[tuple[str, "CacheStats"]] = []   # (step, statistics) of this process, in order


@dataclass(frozen=True)
class CacheSetting:
    """What FEEDSTOCK_COMPILE_CACHE asks for."""

    location: str            # a URL without credentials, or an absolute folder
    remote: bool
    read_only: bool = False

    @property
    def host_port(self) -> tuple[str, int]:
        parts = urlsplit(self.location)
        return parts.hostname or "", parts.port or REMOTE_SCHEMES[parts.scheme]


def parse_setting(value: str, read_only: bool = False) -> CacheSetting:
    """A URL (redis://, http://) or an absolute folder; bad input is a one-line error."""
    value = value.strip()
    if "://" not in value:
        if not os.path.isabs(value):
            raise MegabuildError(f"{CACHE_VARIABLE}={value!r}: give an absolute folder or a "
                                 "redis:// or http:// URL")
        return CacheSetting(location=value, remote=False, read_only=read_only)
    parts = urlsplit(value)
    if parts.scheme not in REMOTE_SCHEMES:
        raise MegabuildError(f"{CACHE_VARIABLE}: unsupported scheme {parts.scheme!r}; use "
                             "redis://host:port, http://host/path or a folder (an NFS mount "
                             "works for every machine that mounts it)")
    if parts.password or parts.username:
        raise MegabuildError(f"{CACHE_VARIABLE}: the URL carries credentials; remove them and set "
                             f"{PASSWORD_VARIABLE} instead (it is passed by name, never printed)")
    if not parts.hostname:
        raise MegabuildError(f"{CACHE_VARIABLE}={value!r}: the URL names no host")
    try:
        parts.port
    except ValueError:
        raise MegabuildError(f"{CACHE_VARIABLE}={value!r}: the port is not a number") from None
    return CacheSetting(location=value, remote=True, read_only=read_only)


def requested(base: Mapping[str, str]) -> CacheSetting | None:
    """The cache the environment asks for (FEEDSTOCK_COMPILE_CACHE, else CCACHE_DIR), or None."""
    read_only = base.get(READ_ONLY_VARIABLE, "").strip().lower() in ("1", "true", "yes")
    if base.get(CACHE_VARIABLE, "").strip():
        return parse_setting(base[CACHE_VARIABLE], read_only)
    if base.get(LEGACY_DIR_VARIABLE, "").strip():
        return parse_setting(os.path.abspath(base[LEGACY_DIR_VARIABLE]), read_only)
    return None


def _with_password(url: str, password: str) -> str:
    if not password:
        return url
    parts = urlsplit(url)
    netloc = f":{password}@{parts.netloc}" if parts.scheme == "redis" else f"ccache:{password}@{parts.netloc}"
    return urlunsplit(parts._replace(netloc=netloc))


def _probe(setting: CacheSetting, password: str) -> str | None:
    """None when the server answers (Redis: PING -> PONG), else what went wrong."""
    host, port = setting.host_port
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as conn:
            if not setting.location.startswith("redis://"):
                return None
            conn.settimeout(PROBE_TIMEOUT_S)
            request = (f"AUTH {password}\r\n" if password else "") + "PING\r\n"
            conn.sendall(request.encode())
            reply = b""
            while b"PONG" not in reply and b"-" not in reply and len(reply) < 512:
                chunk = conn.recv(512)
                if not chunk:
                    break
                reply += chunk
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    if b"+PONG" in reply:
        return None
    first_error = next((line for line in reply.decode(errors="replace").splitlines()
                        if line.startswith("-")), "no PONG")
    return f"it answered {first_error[1:60]!r} (check {PASSWORD_VARIABLE})"


def reachable(setting: CacheSetting, password: str = "") -> bool:
    """Probe a remote cache once per process; the first failure logs the one warning line."""
    if not setting.remote:
        return True
    key = (setting.location, password)
    if key not in _probed:
        problem = _probe(setting, password)
        _probed[key] = problem
        if problem:
            log.info(f"warning: compile cache {setting.location} is not reachable ({problem}); "
                     "building without it")
    return _probed[key] is None


def base_dir(base: Mapping[str, str]) -> str | None:
    """The common parent of the build's own folders (everything below it hashes relative)."""
    paths = [base[name] for name in ("SRC_DIR", "PREFIX", "BUILD_PREFIX")
             if os.path.isabs(base.get(name, ""))]
    if not paths:
        return None
    common = os.path.commonpath(paths)
    return common if common != os.sep else None


def stats_log_path(root: str | None) -> str:
    """One stats log per build folder, the same for every step (so every step sees the same
    environment); each step reads only what was appended while it ran."""
    folder = root or tempfile.gettempdir()
    name = STATS_LOG_NAME if root else f"megabuild-{os.getuid()}-{STATS_LOG_NAME}"
    return str(Path(folder) / name)


def cache_environment(base: Mapping[str, str]) -> dict[str, str]:
    """Variables to add to the build environment; {} when no cache is asked for or usable.

    Explicit compiler launchers in `base` win (they are only filled in where unset)."""
    setting = requested(base)
    if setting is None:
        return {}
    ccache = shutil.which("ccache", path=base.get("PATH", os.defpath))
    if ccache is None:
        log.info(f"warning: compile cache {setting.location} asked for, but ccache is not on "
                 "PATH; building without it (add ccache to the build requirements)")
        return {}
    password = base.get(PASSWORD_VARIABLE, "")
    if not reachable(setting, password):
        return {}
    root = base_dir(base)
    env = {"CCACHE_NOHASHDIR": "1", "CCACHE_COMPILERCHECK": "content",
           STATS_LOG_VARIABLE: stats_log_path(root)}
    if root:
        env["CCACHE_BASEDIR"] = root
    if setting.remote:
        url = _with_password(setting.location, password)
        env["CCACHE_REMOTE_STORAGE"] = url + ("|read-only" if setting.read_only else "")
        env["CCACHE_REMOTE_ONLY"] = "true"
    else:
        env["CCACHE_DIR"] = setting.location
        if setting.read_only:
            env["CCACHE_READONLY"] = "1"
    for lang in LANGUAGES:
        name = f"CMAKE_{lang}_COMPILER_LAUNCHER"
        if not base.get(name):
            env[name] = ccache
    log.info(f"compile cache: ccache -> {setting.location}"
             f"{' (read-only)' if setting.read_only else ''}, base_dir={root or '-'}")
    return env


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    uncacheable: int
    remote_hits: int
    remote_errors: int
    misses_by_source: tuple[str, ...]    # the sources compiled (not served), in order

    def line(self) -> str:
        text = f"{self.hits} hits, {self.misses} misses, {self.uncacheable} uncacheable"
        if self.remote_hits or self.remote_errors:
            text += f" (remote: {self.remote_hits} hits, {self.remote_errors} errors)"
        return text


def parse_stats_log(text: str) -> CacheStats:
    """Sum ccache's stats log: one `# source` line per call, then the counters it bumped."""
    calls: list[tuple[str, set[str]]] = []
    for line in text.splitlines():
        if line.startswith("# "):
            calls.append((line[2:], set()))
        elif line.strip() and calls:
            calls[-1][1].add(line.strip())
    counts: Counter = Counter()
    misses = []
    for source, counters in calls:
        if counters & set(HIT_COUNTERS):
            counts["hits"] += 1
        elif counters & set(MISS_COUNTERS):
            counts["misses"] += 1
            misses.append(source)
        else:
            counts["uncacheable"] += 1
        counts["remote_hits"] += "remote_storage_hit" in counters
        counts["remote_errors"] += "remote_storage_error" in counters
    return CacheStats(counts["hits"], counts["misses"], counts["uncacheable"],
                      counts["remote_hits"], counts["remote_errors"], tuple(misses))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@contextlib.contextmanager
def step_statistics(env: Mapping[str, str], step: str) -> Iterator[None]:
    """Around one driver step: print its statistics line at the end (also when it fails)."""
    name = env.get(STATS_LOG_VARIABLE)
    if not name:
        yield
        return
    path = Path(name)
    start = _size(path)
    try:
        yield
    finally:
        text = ""
        if _size(path) > start:
            with path.open("rb") as stream:
                stream.seek(start)
                text = stream.read().decode(errors="replace")
        stats = parse_stats_log(text)
        reports.append((step, stats))
        log.info(f"compile cache statistics ({step}): {stats.line()}")
