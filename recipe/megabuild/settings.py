"""The settings line: the first line of every driver step names each setting the driver acts
on, with its value and where it came from (a variable, or `default`).

conda-build passes the build only the variables its recipe's script_env lists, so a developer
setting (--jobs, --cuda-arch, --compile-cache ...) could vanish without a word and the build
go on with defaults. The line makes that visible at the top of the build log. Values are read
back from the environment the driver computed (`BuildContext.env`), not worked out again, so
the line shows what the build uses. Secrets are never printed: the cache password is `set` or
`not set`, and a URL loses any credentials.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit, urlunsplit

from . import compile_cache, job_pools, log
from .build_env import gpu_backend
from .context import BuildContext
from .frontend import FRONTEND_OVERRIDE

DEFAULT = "default"
# the driver's folders, set by the develop step (and by hand): shown only when set
FOLDER_VARIABLES = {"MEGABUILD_STAGE_DIR": "stage dir", "MEGABUILD_BUILD_DIR": "build dir",
                    "MEGABUILD_WORK_DIR": "work dir"}
# backend -> (what the line calls its arch list, the override, the variable the build reads)
ARCH_SETTINGS = {"cuda": ("cuda archs", "FEEDSTOCK_CUDA_ARCH_LIST", "TORCH_CUDA_ARCH_LIST"),
                 "rocm": ("rocm archs", "FEEDSTOCK_ROCM_ARCH", "PYTORCH_ROCM_ARCH")}
DEV_TAG_VARIABLE = "FEEDSTOCK_DEV_TAG"


@dataclass(frozen=True)
class Setting:
    name: str     # "jobs"
    value: str    # "8"
    source: str   # the variable it came from, or DEFAULT (with a note after a comma)

    def text(self) -> str:
        return f"{self.name} {self.value} ({self.source})"


def _given(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name, "").strip()


def redact(location: str) -> str:
    """A cache location fit to print: a URL's user, password and query values become ***."""
    if "://" not in location:
        return location
    parts = urlsplit(location)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(f"{pair.split('=', 1)[0]}=***" for pair in parts.query.split("&") if pair)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _jobs(ctx: BuildContext, environ: Mapping[str, str]) -> list[Setting]:
    jobs = Setting("jobs", ctx.env.get("MAX_JOBS", "?"),
                   "FEEDSTOCK_MAX_JOBS" if _given(environ, "FEEDSTOCK_MAX_JOBS") else DEFAULT)
    pools = dict(entry.split("=", 1) for entry in ctx.env.get("CMAKE_JOB_POOLS", "").split(";")
                 if "=" in entry)
    size, asked = pools.get(job_pools.POOL_NAME, "none"), _given(environ, "FEEDSTOCK_HEAVY_JOBS")
    # the pool is never wider than MAX_JOBS: a bigger override is capped, and the line says so
    capped = asked and not (asked.isdigit() and size.isdigit() and int(asked) == int(size))
    source = DEFAULT if not asked else f"FEEDSTOCK_HEAVY_JOBS={asked}, at most jobs" if capped \
        else "FEEDSTOCK_HEAVY_JOBS"
    return [jobs, Setting("heavy jobs", size, source)]


def _archs(ctx: BuildContext, environ: Mapping[str, str]) -> list[Setting]:
    backend = gpu_backend(ctx.variant)
    found = []
    for kind, (name, override, used) in ARCH_SETTINGS.items():
        asked = _given(environ, override)
        if kind == backend:
            found.append(Setting(name, ctx.env.get(used, "?"), override if asked else DEFAULT))
        elif asked:  # said, so that a misdirected override is seen rather than silently unused
            found.append(Setting(name, asked, f"{override}, ignored: a {backend} build"))
    return found


def _compile_cache(ctx: BuildContext, environ: Mapping[str, str]) -> list[Setting]:
    asked = compile_cache.requested(environ)  # already checked when ctx was made
    variable = compile_cache.CACHE_VARIABLE if _given(environ, compile_cache.CACHE_VARIABLE) \
        else compile_cache.LEGACY_DIR_VARIABLE
    if asked is None:
        cache = Setting("compile cache", "none", DEFAULT)
    elif ctx.env.get(compile_cache.STATS_LOG_VARIABLE):  # set only when ccache will run
        cache = Setting("compile cache", redact(asked.location), variable)
    else:
        cache = Setting("compile cache", "off", f"{variable}={redact(asked.location)} unusable, "
                                                "see the warning below")
    found = [cache]
    legacy = _given(environ, compile_cache.LEGACY_DIR_VARIABLE)
    if legacy and variable != compile_cache.LEGACY_DIR_VARIABLE:
        found.append(Setting("ccache dir", legacy, f"{compile_cache.LEGACY_DIR_VARIABLE}, "
                                                   f"ignored: {compile_cache.CACHE_VARIABLE} wins"))
    read_only = _given(environ, compile_cache.READ_ONLY_VARIABLE)
    found.append(Setting("compile cache read-only", "yes" if asked and asked.read_only else "no",
                         compile_cache.READ_ONLY_VARIABLE if read_only else DEFAULT))
    password = bool(environ.get(compile_cache.PASSWORD_VARIABLE))
    found.append(Setting("compile cache password", "set" if password else "not set",
                         compile_cache.PASSWORD_VARIABLE if password else DEFAULT))
    return found


def _front_end(ctx: BuildContext, environ: Mapping[str, str]) -> Setting:
    override = _given(environ, FRONTEND_OVERRIDE)
    if override:
        return Setting("front end", override, FRONTEND_OVERRIDE)
    # what select_frontend will pick from the tree, without its refusals (the step makes them)
    from .scikit_build import declares_scikit_build_core
    from .errors import MegabuildError

    pyproject = ctx.src_dir / "pyproject.toml"
    try:
        declared = pyproject.is_file() and declares_scikit_build_core(pyproject)
    except MegabuildError:
        declared = False
    name = "scikit-build-core" if declared else \
        "setup.py" if (ctx.src_dir / "setup.py").is_file() else "none found"
    return Setting("front end", name, DEFAULT)


def settings(ctx: BuildContext, environ: Mapping[str, str]) -> list[Setting]:
    """Every setting the driver acts on, in the line's order."""
    dev_tag = _given(environ, DEV_TAG_VARIABLE)
    found = [*_jobs(ctx, environ), *_archs(ctx, environ),
             # the recipe's build strings use it, not the driver: shown so a lost one is seen
             Setting("dev tag", dev_tag or "none", DEV_TAG_VARIABLE if dev_tag else DEFAULT),
             *_compile_cache(ctx, environ), _front_end(ctx, environ)]
    for variable, name in FOLDER_VARIABLES.items():
        if _given(environ, variable):
            found.append(Setting(name, environ[variable], variable))
    return found


def settings_line(ctx: BuildContext, environ: Mapping[str, str]) -> str:
    return "settings: " + ", ".join(setting.text() for setting in settings(ctx, environ))


def start_step(environ: Mapping[str, str] = os.environ) -> BuildContext:
    """The step's context, with the settings line as the step's first line; what making the
    context logged (a compile cache that does not answer) comes right after it."""
    with log.held() as held:
        ctx = BuildContext.from_environ(environ)
        held.insert(0, settings_line(ctx, environ))
    return ctx
