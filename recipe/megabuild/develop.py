"""The develop step: a developer's own PyTorch checkout, built with a config's settings into a
build folder kept outside the checkout, and installed into the develop environment.

`build-locally.py CONFIG --develop PATH` makes the environment (the config's pytorch output's
build and host requirements, localbuild/in_container/develop.py) and runs this step in it, with
`PKG_NAME=develop`, `SRC_DIR` the checkout, `PREFIX`/`PYTHON` the environment's, and
`MEGABUILD_BUILD_DIR` / `MEGABUILD_STAGE_DIR` / `MEGABUILD_WORK_DIR` folders beside it. What the
package build sets (the `USE_*` switches, BLAS, arch lists, job pools, the compile cache, the
CMake range) comes from the same `build_environment`; on top of it (`develop_environment`):

- the environment's headers and libraries before the system's: `-isystem $PREFIX/include` in
  the C/C++ flags and `-L$PREFIX/lib -Wl,-rpath,$PREFIX/lib` in the link flags, as conda's own
  compiler activation adds them (a compiler package without that activation gets them here);
  `CMAKE_PREFIX_PATH` starts with the environment;
- `LD_LIBRARY_PATH` is the environment's lib folder (and ROCm's for a ROCm config), never one
  the shell had: the libraries that run are the ones the build linked;
- Python's bytecode for the checkout's own build scripts goes to the work folder
  (`PYTHONPYCACHEPREFIX`), not into the checkout.

Each run is incremental: scikit-build-core keeps the build folder (the driver's copy of it, as in
the megabuild), Ninja recompiles what the edit touched, pip installs torch again. The step
reports the recompiled objects from `.ninja_log` (`ninja_log.py`) and writes the variables it
built with to `build-env.sh` in the work folder, which `--shell` sources.
"""
from __future__ import annotations

import dataclasses
import shlex
import time
from pathlib import Path
from typing import Mapping

from . import log, ninja_log
from .build_env import gpu_backend
from .context import BuildContext
from .errors import MegabuildError
from .files import write_atomically
from .frontend import Frontend, check_frontend, select_frontend
from .hipify import run_hipify
from .python_target import PythonTarget

VARIABLES_FILE = "build-env.sh"
VARIABLES_ONLY = "MEGABUILD_DEVELOP_VARIABLES_ONLY"
ROCM_LIB_DIRS = ("lib",)


def _with_flag(flags: str, flag: str) -> str:
    """`flag` (one or more words) first in `flags`, unless `flags` already has it."""
    words, wanted = flags.split(), flag.split()
    present = any(words[i:i + len(wanted)] == wanted for i in range(len(words)))
    return flags if present else f"{flag} {flags}".strip()


def develop_environment(env: Mapping[str, str], prefix: Path) -> dict[str, str]:
    """`env` with the environment's include and library folders first (see the module doc)."""
    out = dict(env)
    include, lib = prefix / "include", prefix / "lib"
    for name in ("CFLAGS", "CXXFLAGS"):
        out[name] = _with_flag(out.get(name, ""), f"-isystem {include}")
    for flag in (f"-Wl,-rpath,{lib}", f"-L{lib}"):
        out["LDFLAGS"] = _with_flag(out.get("LDFLAGS", ""), flag)
    prefix_path = [str(prefix)] + [p for p in out.get("CMAKE_PREFIX_PATH", "").split(":") if p and p != str(prefix)]
    out["CMAKE_PREFIX_PATH"] = ":".join(prefix_path)
    libraries = [str(lib)]
    if out.get("ROCM_PATH"):
        libraries += [str(Path(out["ROCM_PATH"]) / d) for d in ROCM_LIB_DIRS]
    out["LD_LIBRARY_PATH"] = ":".join(libraries)
    return out


def variables_script(env: Mapping[str, str], base: Mapping[str, str]) -> str:
    """`export` lines for every variable the build set or changed (sourced by --shell)."""
    lines = ["# the variables the develop step built with (megabuild/develop.py); sourced by --shell"]
    for key in sorted(env):
        if base.get(key) != env[key]:
            lines.append(f"export {key}={shlex.quote(env[key])}")
    return "\n".join(lines) + "\n"


def work_dir(ctx: BuildContext, base: Mapping[str, str]) -> Path:
    """The develop folder's own files (variables, job-pool include, temporary files)."""
    if ctx.build_dir is None or not base.get("MEGABUILD_WORK_DIR"):
        raise MegabuildError("the develop step needs MEGABUILD_BUILD_DIR and MEGABUILD_WORK_DIR "
                             "(folders outside the checkout); run it through build-locally.py --develop")
    return Path(base["MEGABUILD_WORK_DIR"])


def run_develop(ctx: BuildContext, base: Mapping[str, str], frontend: Frontend | None = None) -> None:
    """Build and install the checkout at ctx.src_dir; `base` is the environment the step got."""
    folder = work_dir(ctx, base)
    frontend = frontend or select_frontend(ctx.env, ctx.src_dir)
    if getattr(frontend, "name", "") != "scikit-build-core":
        raise MegabuildError(f"{ctx.src_dir} builds through setup.py (PyTorch 2.13 or older), "
                             "whose build folder is the checkout's own build/; --develop builds "
                             "2.14+ checkouts (scikit-build-core), whose build folder it keeps "
                             "outside the checkout: check out v2.14.0 or later")
    ctx = dataclasses.replace(ctx, env=develop_environment(ctx.env, ctx.prefix))
    write_atomically(folder / VARIABLES_FILE, variables_script(ctx.env, base).encode())
    if ctx.env.get("TMPDIR"):   # the shell's temporary files go there too
        Path(ctx.env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
    if base.get(VARIABLES_ONLY) == "1":   # --shell: the variables, no build
        log.info(f"develop: the build's variables are in {folder / VARIABLES_FILE}")
        return
    check_frontend(frontend, ctx)
    target = PythonTarget.query(ctx.python, ctx.env)
    if gpu_backend(ctx.variant) == "rocm":
        run_hipify(ctx)   # converts the checkout's CUDA sources in place, as the package build does
    build_dir = frontend.build_dir(ctx)
    before = ninja_log.last_entries(build_dir)
    with log.step(f"develop: build {ctx.src_dir} for Python {target.version} into {build_dir}"):
        frontend.freeze_backend(ctx)
        started = time.monotonic()
        frontend.install(ctx)
        seconds = time.monotonic() - started
    result = ninja_log.recompiled(before, ninja_log.last_entries(build_dir))
    shown = ", ".join(result.objects[:5]) + (", ..." if result.count > 5 else "")
    log.info(f"develop: recompiled {result.count} of {result.total} objects in "
             f"{log.format_seconds(seconds)}" + (f" ({shown})" if result.count and result.count < result.total else ""))
    log.info(f"develop: torch installed into {target.platlib}")
