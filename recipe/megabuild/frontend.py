"""The build front end: how PyTorch's own build is driven. Kept in one module on purpose.

Today PyTorch builds through `setup.py` (`SetupPyFrontend`): `python setup.py build` configures
CMake only when `build/CMakeCache.txt` is missing and otherwise just builds, leaving
`build/lib.<platform>-<cache tag>/torch/{bin,lib,include,share}`; `pip install . --no-deps
--no-build-isolation` rebuilds what changed and installs into the interpreter's site-packages.
PyTorch's main branch moved to scikit-build-core (persistent `build-dir`); a front end for it
implements the same three methods. The steps talk to the front end only through `Frontend`
and assume nothing from CMake beyond `build_dir/CMakeCache.txt` and the `lib.*` layout.
"""
from __future__ import annotations

import importlib.util
import shlex
import subprocess
from pathlib import Path
from typing import Mapping, Protocol, Sequence

from . import job_pools, log
from .context import BuildContext
from .errors import MegabuildError


class Frontend(Protocol):
    def build_dir(self, ctx: BuildContext) -> Path:
        """Where CMakeCache.txt lives."""
        ...

    def build(self, ctx: BuildContext) -> None:
        """Build with ctx.python; configure only if the cache is missing."""
        ...

    def install(self, ctx: BuildContext) -> None:
        """Rebuild what changed and install into ctx.python's site-packages."""
        ...


def run_command(args: Sequence[str | Path], ctx: BuildContext) -> None:
    """Run a child process in the source tree with the context's environment."""
    argv = [str(a) for a in args]
    log.info(f"$ {shlex.join(argv)}")
    try:
        proc = subprocess.run(argv, cwd=ctx.src_dir, env=dict(ctx.env))
    except OSError as exc:
        raise MegabuildError(f"cannot run {argv[0]}: {exc}") from None
    if proc.returncode != 0:
        raise MegabuildError(f"`{shlex.join(argv)}` failed with exit code {proc.returncode}; "
                             "see its output above")


class SetupPyFrontend:
    """PyTorch's setup.py (up to 2.13)."""

    def build_dir(self, ctx: BuildContext) -> Path:
        return ctx.src_dir / "build"

    def build(self, ctx: BuildContext) -> None:
        job_pools.ensure_include(ctx.env)  # CMake reads it at (re)configure time
        run_command([ctx.python, "setup.py", "build"], ctx)

    def install(self, ctx: BuildContext) -> None:
        job_pools.ensure_include(ctx.env)
        run_command([ctx.python, "-m", "pip", "install", ".", "--no-deps",
                     "--no-build-isolation", "--disable-pip-version-check"], ctx)


# A developer override, never set by the recipe: a Python file whose `frontend()` returns the
# Frontend to use instead of setup.py. The feedstock's tests use it to package the real PyTorch
# wheel through the real recipe and tools without compiling PyTorch for hours.
FRONTEND_OVERRIDE = "MEGABUILD_FRONTEND"


def select_frontend(environ: Mapping[str, str]) -> Frontend:
    """SetupPyFrontend, or the one $MEGABUILD_FRONTEND's file makes."""
    path = environ.get(FRONTEND_OVERRIDE, "")
    if not path:
        return SetupPyFrontend()
    file = Path(path)
    if not file.is_file():
        raise MegabuildError(f"{FRONTEND_OVERRIDE}={path} is not a file; unset it to build with "
                             "setup.py, or point it at a Python file that defines frontend()")
    spec = importlib.util.spec_from_file_location("megabuild_frontend_override", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    factory = getattr(module, "frontend", None)
    if not callable(factory):
        raise MegabuildError(f"{FRONTEND_OVERRIDE}={path} defines no frontend() function")
    chosen = factory()
    missing = [m for m in ("build_dir", "build", "install") if not callable(getattr(chosen, m, None))]
    if missing:
        raise MegabuildError(f"{FRONTEND_OVERRIDE}={path}: frontend() returned "
                             f"{type(chosen).__name__}, which lacks {', '.join(missing)}()")
    log.info(f"front end: {type(chosen).__name__} from {path} ({FRONTEND_OVERRIDE}, a developer override)")
    return chosen
