"""The build front end: how PyTorch's own build is driven, and which one a source tree gets.

Up to 2.13 PyTorch builds through `setup.py` (`SetupPyFrontend`): `python setup.py build`
configures CMake only when `build/CMakeCache.txt` is missing and otherwise just builds, leaving
`build/lib.<platform>-<cache tag>/torch/{bin,lib,include,share}`; `pip install . --no-deps
--no-build-isolation` rebuilds what changed and installs into the interpreter's site-packages.
From 2.14 it builds through scikit-build-core (`scikit_build.ScikitBuildCoreFrontend`), which
implements the same methods. The source tree picks (`select_frontend`): a pyproject.toml whose
`build-backend` is scikit-build-core's selects that one, a tree with setup.py keeps setup.py.
The steps talk to the front end only through `Frontend` and assume nothing from CMake beyond
`build_dir/CMakeCache.txt` and the staged `torch/` layout.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Mapping, Protocol

from . import job_pools, log
from .build_commands import check_cache_source, run_command
from .context import BuildContext
from .errors import MegabuildError
from .python_target import PythonTarget
from .staging import find_layout_dir
from .tool_versions import check_cmake


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

# Optional: `layout_dir(ctx, target) -> Path`, the `torch/` folder whose bin, lib, include and
# share the split step stages. Without it, setup.py's `build_dir/lib.*/torch` is looked up.
# Optional: `check(ctx)`, what the front end refuses (a CMake outside the recipe's range, a
# build folder of another source tree), called by every step before it writes anything; it
# returns the path of the CMake the step will run. A front end that runs no CMake (the
# tests' wheel stand-in) has none.
# Optional: `configure(ctx) -> bool`, CMake's configure alone into build_dir, as the next
# build() would run it; False when it cannot. The split runs it before each build, so what the
# cache says is checked before anything compiles (configure_checks).


def check_frontend(frontend: Frontend, ctx: BuildContext) -> str | None:
    """The front end's own refusals, if it has any (see `check` above); its CMake's path."""
    check = getattr(frontend, "check", None)
    return check(ctx) if callable(check) else None


def configure_first(frontend: Frontend, ctx: BuildContext) -> bool:
    """Run the front end's configure alone (see `configure` above); whether it ran."""
    configure = getattr(frontend, "configure", None)
    return bool(configure(ctx)) if callable(configure) else False


class SetupPyFrontend:
    """PyTorch's setup.py (up to 2.13)."""

    def build_dir(self, ctx: BuildContext) -> Path:
        return ctx.src_dir / "build"

    def check(self, ctx: BuildContext) -> str:
        cmake = check_cmake(ctx.env)
        build_dir = self.build_dir(ctx)
        check_cache_source(build_dir / "CMakeCache.txt", ctx.src_dir,
                           f"remove {build_dir} to build from scratch, or build from that tree")
        return cmake

    def configure(self, ctx: BuildContext) -> bool:
        """setup.py's own configure (`build --cmake-only`) into a folder without a cache; on
        an existing cache the step's CMake configures it again. That is what Ninja would run
        before compiling anyway, but Ninja runs the CMake that wrote build.ninja (the cache's
        CMAKE_COMMAND), which may be gone: PyPI's cmake in an earlier step's environment."""
        job_pools.ensure_include(ctx.env)  # CMake reads it at (re)configure time
        build_dir = self.build_dir(ctx)
        if (build_dir / "CMakeCache.txt").is_file():
            run_command([check_cmake(ctx.env), "-S", ctx.src_dir, "-B", build_dir], ctx)
        else:
            run_command([ctx.python, "setup.py", "build", "--cmake-only"], ctx)
        return True

    def build(self, ctx: BuildContext) -> None:
        job_pools.ensure_include(ctx.env)  # CMake reads it at (re)configure time
        run_command([ctx.python, "setup.py", "build"], ctx)

    def install(self, ctx: BuildContext) -> None:
        self.configure(ctx)  # by this step's CMake, never by a CMAKE_COMMAND that is gone
        run_command([ctx.python, "-m", "pip", "install", ".", "--no-deps",
                     "--no-build-isolation", "--disable-pip-version-check"], ctx)

def layout_dir(frontend: Frontend, ctx: BuildContext, target: PythonTarget) -> Path:
    """The front end's staged `torch/` folder (setup.py's `build/lib.*/torch` by default)."""
    own = getattr(frontend, "layout_dir", None)
    if callable(own):
        return own(ctx, target)
    return find_layout_dir(frontend.build_dir(ctx), target)


# A developer override, never set by the recipe: a Python file whose `frontend()` returns the
# Frontend to use instead of setup.py. The feedstock's tests use it to package the real PyTorch
# wheel through the real recipe and tools without compiling PyTorch for hours.
FRONTEND_OVERRIDE = "MEGABUILD_FRONTEND"


def select_frontend(environ: Mapping[str, str], src_dir: Path | None = None) -> Frontend:
    """The one $MEGABUILD_FRONTEND's file makes; else what the source tree declares: a
    scikit-build-core `build-backend` in pyproject.toml, or setup.py (also without src_dir)."""
    path = environ.get(FRONTEND_OVERRIDE, "")
    if not path:
        if src_dir is None:
            return SetupPyFrontend()
        from .scikit_build import frontend_for  # lazily: most builds take the override or setup.py
        chosen = frontend_for(src_dir) or SetupPyFrontend()
        log.info(f"front end: {type(chosen).__name__} (what {src_dir} declares)")
        return chosen
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
