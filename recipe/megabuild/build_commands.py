"""What every front end does the same way: run a command of the build in the source tree, and
refuse a build folder that another source tree configured. Its own module, so that the front
ends (frontend.py's setup.py, scikit_build.py) both import it and never each other."""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from . import log
from .cmake_cache import CMakeCache
from .context import BuildContext
from .errors import MegabuildError


def check_cache_source(cache_file: Path, src_dir: Path, start_over: str) -> None:
    """Refuse a CMake cache that another source tree configured (CMAKE_HOME_DIRECTORY)."""
    if not cache_file.is_file():
        return
    cache = CMakeCache.read(cache_file)
    home = cache.get("CMAKE_HOME_DIRECTORY") if "CMAKE_HOME_DIRECTORY" in cache else ""
    source = Path(src_dir).resolve()
    if home and Path(home).resolve() != source:
        raise MegabuildError(f"{cache_file} is a CMake cache of the source tree {home}, not "
                             f"{source}; {start_over}")


def run_command(args: Sequence[str | Path], ctx: BuildContext,
                env: Mapping[str, str] | None = None) -> None:
    """Run a child process in the source tree with the context's environment (or `env`)."""
    argv = [str(a) for a in args]
    log.info(f"$ {shlex.join(argv)}")
    env = dict(ctx.env if env is None else env)
    if env.get("TMPDIR"):   # made by the first command: a tree refused before any leaves no trace
        Path(env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(argv, cwd=ctx.src_dir, env=env)
    except OSError as exc:
        raise MegabuildError(f"cannot run {argv[0]}: {exc}") from None
    if proc.returncode != 0:
        raise MegabuildError(f"`{shlex.join(argv)}` failed with exit code {proc.returncode}; "
                             "see its output above")
