"""The driver's steps, one per conda-build output, selected by PKG_NAME (`run_step`).

- `libtorch-split` (top level, once per variant) -> `run_split`: the source tree is prepared
  (`source_prep`: no submodule check, no downloads); ROCm sources are hipified once; the front end builds against the fixed build Python. On CUDA variants
  libtorch_cuda_linalg is staged as `<stage>/cuda-linalg/nomagma`, then `USE_MAGMA` is set to
  ON in the cache, the front end rebuilds (the linalg sources, plus in PyTorch whatever
  includes the generated ATen/cuda/CUDAConfig.h) and the result is staged as
  `<stage>/cuda-linalg/magma`. Then, from the final `build/lib.*/torch/{bin,lib,include,share}`,
  everything except libtorch_python and libtorch_cuda_linalg is staged as `<stage>/libtorch`
  (the scikit-build-core front end stages from its wheel's `torch/` instead of `build/lib.*`)
  (so libtorch's headers and torch_cuda agree with the cache the pytorch steps reuse), and the
  cache is saved as `<stage>/CMakeCache.pristine.txt`, sealed (`cache_seal`: a cut or changed
  copy is named truncated or damaged before any entry is read).
- `libtorch` -> `install_libtorch`: copies `<stage>/libtorch` into `$PREFIX`; CUDA variants
  also get activation scripts that set TORCH_CUDA_ARCH_LIST for downstream builds (`activation`).
- `libtorch-cuda-linalg` -> `install_cuda_linalg`: copies the magma or nomagma library
  (`use_magma`) into `$PREFIX`.
  Both install steps first compare: `$PREFIX` already holds the output's host dependencies, so
  a staged path that exists there with other content (another package's file) stops the step
  before anything is copied; identical files (the step run again) are fine.
- `pytorch` (once per Python) -> `build_pytorch`. With `megabuild=true` (Linux) the pristine
  cache is retargeted to `ctx.python` (always from the pristine copy, which is never written)
  and written over `build/CMakeCache.txt`; with `megabuild=false` (elsewhere) nothing is
  retargeted: `build/CMakeCache.txt` is removed, so the front end configures CMake afresh with
  the step's environment against `ctx.python` (slower, but no cache surgery). Either way the
  front end then installs into that interpreter's site-packages (with a retargeted cache only
  Python-dependent code recompiles); libtorch_python is copied to `$PREFIX/lib`; every file
  under `site-packages/torch/{bin,lib,include,share}` that `$PREFIX` has becomes a symlink into
  `$PREFIX` (relative when site-packages is inside `$PREFIX`; `staging.is_loaded_by_path` keeps
  the exception a real file); `.pyc` files of other Python
  versions are deleted.

A missing precondition (no staged files, no pristine cache, no interpreter, no USE_MAGMA in
the cache), a staged file that would clobber another package's file, or an unknown `megabuild`
or `use_magma` value is a MegabuildError with one line saying what to do (e.g. which step to
run first).
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Callable, Mapping

from . import compile_cache, linalg_flavour, log
from .activation import write_activation_scripts
from .build_env import gpu_backend
from .cache_seal import check_seal, read_sealed, seal
from .cmake_cache import CMakeCache
from .cmake_self import replace_dead_cmake
from .configure_checks import check_configured, check_flipped, flipped_switches
from .context import BuildContext
from .errors import MegabuildError
from .files import write_atomically
from .build_commands import check_cache_source, run_command
from .hipify import run_hipify
from .frontend import Frontend, check_frontend, configure_first, layout_dir, select_frontend
from .python_target import PythonTarget
from .retarget import retarget_cache
from .source_prep import prepare_source
from .split_rerun import require_split_python, restore_split_state
from .staging import (copy_tree, find_clobbers, installed_top_levels,
                      is_cuda_linalg_library, is_python_library, link_into_prefix,
                      remove_foreign_pyc, replace_stage, LIBTORCH_DIRS)

PRISTINE_CACHE = "CMakeCache.pristine.txt"
# what a truncated or damaged pristine cache asks for: the split writes it whole, sealed
SPLIT_AGAIN = "run the libtorch-split step (the top-level build) again"
LIBTORCH_STAGE = "libtorch"
LINALG_STAGE = "cuda-linalg"


def pristine_cache_path(ctx: BuildContext) -> Path:
    return ctx.stage_dir / PRISTINE_CACHE


def linalg_stage_dir(ctx: BuildContext, magma: bool) -> Path:
    return ctx.stage_dir / LINALG_STAGE / ("magma" if magma else "nomagma")


def _linalg_libraries(layout: Path) -> list[Path]:
    libs = sorted(p for p in (layout / "lib").glob("*") if is_cuda_linalg_library(p.name))
    if not libs:
        raise MegabuildError(f"no libtorch_cuda_linalg in {layout / 'lib'}; was the build "
                             "configured with USE_CUDA=1?")
    return libs


def _wait_past_install_granularity(build_dir: Path) -> None:
    """CMake's install skips a file whose time is within 1 s of the installed copy; make sure
    a rebuilt library cannot fall into the same second as the one installed before (in real
    PyTorch builds the steps are minutes apart and this never waits)."""
    files = [p for p in build_dir.glob("lib.*/torch/lib/*") if not p.is_symlink()]
    if not files:
        return
    newest = max(p.stat().st_mtime for p in files)
    delay = newest + 1.1 - time.time()
    if delay > 0:
        time.sleep(delay)


def _stage(layout: Path, dest: Path, keep: Callable[[Path], bool]) -> list[Path]:
    """Copy the files of torch/{bin,lib,include,share} that `keep` accepts to a fresh `dest`."""
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    files = []
    for sub in LIBTORCH_DIRS:
        if (layout / sub).is_dir():
            files += copy_tree(layout / sub, tmp / sub, keep=keep)
    if not files:
        raise MegabuildError(f"nothing to stage under {layout}/{{{','.join(LIBTORCH_DIRS)}}}")
    replace_stage(tmp, dest)
    return files


def _stage_linalg(layout: Path, dest: Path) -> None:
    linalg_flavour.forget(dest)  # recorded only once its flavour is known (linalg_flavour)
    _linalg_libraries(layout)  # a clear error when the build made none
    files = _stage(layout, dest, keep=lambda p: is_cuda_linalg_library(p.name))
    log.info(f"staged {', '.join(p.name for p in files)} -> {dest}")


def _stage_libtorch(layout: Path, dest: Path) -> None:
    """Everything except libtorch_python (pytorch's) and libtorch_cuda_linalg (its own output)."""
    with log.step("split: stage libtorch"):
        files = _stage(layout, dest, keep=lambda p: not (
            is_python_library(p.name) or is_cuda_linalg_library(p.name)))
        log.info(f"staged {len(files)} libtorch files -> {dest}")


def run_split(ctx: BuildContext, frontend: Frontend | None = None) -> None:
    frontend = frontend or select_frontend(ctx.env, ctx.src_dir)
    backend = gpu_backend(ctx.variant)
    check_frontend(frontend, ctx)  # before anything is written
    target = PythonTarget.query(ctx.python, ctx.env)
    build_dir = frontend.build_dir(ctx)
    ctx.stage_dir.mkdir(parents=True, exist_ok=True)
    log.info(f"split: backend={backend} BLAS={ctx.env.get('BLAS')} MAX_JOBS="
             f"{ctx.env.get('MAX_JOBS')} python={target.version} stage={ctx.stage_dir}")
    prepare_source(Path(ctx.src_dir))
    if backend == "rocm":
        run_hipify(ctx)
    cache_path = build_dir / "CMakeCache.txt"
    switches = flipped_switches(backend, ctx.env)
    restore_split_state(cache_path, target, switches)
    # configure alone first: what the pytorch steps and the flip need of the cache is checked
    # before anything compiles (configure_checks); front ends without a configure of their
    # own are checked after the build
    with log.step("split: configure"):
        if configure_first(frontend, ctx):
            check_configured(cache_path, ctx.src_dir, switches)
    with log.step(f"split: build against Python {target.version}"):
        frontend.build(ctx)
    check_configured(cache_path, ctx.src_dir, switches)
    layout = layout_dir(frontend, ctx, target)
    if backend == "cuda":
        nomagma_dir, magma_dir = linalg_stage_dir(ctx, magma=False), linalg_stage_dir(ctx, magma=True)
        linalg_flavour.forget(magma_dir)  # until the flip below is proven, no magma stage installs
        _stage_linalg(layout, nomagma_dir)
        linalg_flavour.record(nomagma_dir, CMakeCache.read(cache_path).get("USE_MAGMA"))
        _wait_past_install_granularity(build_dir)
        with log.step("split: rebuild libtorch_cuda_linalg with USE_MAGMA=ON"):
            cache = CMakeCache.read(cache_path)
            old = cache.get("USE_MAGMA")
            cache.set("USE_MAGMA", "ON")
            cache.write(cache_path)
            log.info(f"{cache_path}: USE_MAGMA {old} -> ON")
            if configure_first(frontend, ctx):
                check_flipped(cache_path, "USE_MAGMA", "ON")
            frontend.build(ctx)
        check_flipped(cache_path, "USE_MAGMA", "ON")
        layout = layout_dir(frontend, ctx, target)
        _stage_linalg(layout, magma_dir)
        nomagma, magma = (sorted(d.rglob("*.so*")) for d in (nomagma_dir, magma_dir))
        if [p.read_bytes() for p in nomagma] == [p.read_bytes() for p in magma]:
            shutil.rmtree(magma_dir)  # the nomagma library under the magma name: never installed
            raise MegabuildError("libtorch_cuda_linalg did not change after setting USE_MAGMA=ON "
                                 f"in {cache_path}, although the configure kept it ON: its "
                                 "sources ignore USE_MAGMA (PyTorch's use it) or the build "
                                 f"installed a stale copy; remove {build_dir} and run the split "
                                 "again (no magma stage was kept)")
        linalg_flavour.record(magma_dir, CMakeCache.read(cache_path).get("USE_MAGMA"))
    # libtorch is staged from the final build (after the MAGMA flip): its headers record
    # USE_MAGMA (ATen/cuda/CUDAConfig.h) and torch_cuda is compiled against them, so it must
    # match the pristine cache that the pytorch steps rebuild from
    _stage_libtorch(layout, ctx.stage_dir / LIBTORCH_STAGE)
    CMakeCache.read(cache_path)  # refuse to save a cache we could not patch later
    require_split_python(cache_path, target)
    write_atomically(pristine_cache_path(ctx), seal(cache_path.read_bytes()))
    log.info(f"saved pristine cache -> {pristine_cache_path(ctx)} (sealed)")


def check_stage_source(ctx: BuildContext) -> None:
    """Refuse a stage that the split step of another source tree made (its pristine cache
    records the tree), before a step installs or rebuilds from it."""
    pristine = pristine_cache_path(ctx)
    if pristine.is_file():  # whole before any entry is judged (a cut copy misleads every check)
        check_seal(pristine.read_bytes(), str(pristine), SPLIT_AGAIN)
    check_cache_source(pristine, ctx.src_dir,
                       f"run the libtorch-split step for this tree, or remove {ctx.stage_dir}")


def _require_stage(path: Path) -> None:
    if not path.is_dir() or not any(path.iterdir()):
        raise MegabuildError(f"no staged files in {path}; run the libtorch-split step "
                             "(the top-level build) first")


def install_staged(source: Path, prefix: Path) -> list[Path]:
    """Copy a staged tree into prefix, refusing before the first copy if any staged file would
    overwrite a different file there (conda-build's host dependencies live in $PREFIX)."""
    clobbers = find_clobbers(source, prefix)
    if clobbers:
        raise MegabuildError(
            f"{len(clobbers)} staged file(s) would overwrite different files already in "
            f"{prefix} (first: {clobbers[0].as_posix()}), which belong to a host dependency; "
            "build against the channel's copy instead of PyTorch's bundled one (USE_SYSTEM_* / "
            "BUILD_CUSTOM_PROTOBUF in megabuild/build_env.py); nothing was installed")
    return copy_tree(source, prefix)


def install_libtorch(ctx: BuildContext) -> None:
    source = ctx.stage_dir / LIBTORCH_STAGE
    _require_stage(source)
    check_stage_source(ctx)
    with log.step(f"libtorch: install staged files into {ctx.prefix}"):
        copied = install_staged(source, ctx.prefix)
        log.info(f"installed {len(copied)} files")
        if gpu_backend(ctx.variant) == "cuda":
            arch_list = ctx.env.get("TORCH_CUDA_ARCH_LIST", "")
            for path in write_activation_scripts(ctx.prefix, arch_list):
                log.info(f"activation: {path} (TORCH_CUDA_ARCH_LIST={arch_list})")


def use_magma(ctx: BuildContext) -> bool:
    """The `use_magma` variant value; anything else is an error, since guessing would ship
    one flavour's library under the other flavour's name."""
    value = ctx.variant.get("use_magma", "").strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise MegabuildError(f"use_magma={ctx.variant.get('use_magma')!r} is not a variant value the "
                         "driver knows; the libtorch-cuda-linalg output needs use_magma true or "
                         "false (recipe/conda_build_config.yaml)")


def install_cuda_linalg(ctx: BuildContext) -> None:
    magma = use_magma(ctx)
    source = linalg_stage_dir(ctx, magma)
    _require_stage(source)
    check_stage_source(ctx)
    linalg_flavour.check(source)  # the library is the flavour the stage's name says
    with log.step(f"libtorch-cuda-linalg ({'magma' if magma else 'nomagma'}): install"):
        copied = install_staged(source, ctx.prefix)
        log.info(f"installed {', '.join(p.name for p in copied)}")


def megabuild_enabled(ctx: BuildContext) -> bool:
    """The `megabuild` variant value (absent means true, the Linux default)."""
    value = ctx.variant.get("megabuild", "true").strip().lower()
    if value not in ("true", "false"):
        raise MegabuildError(f"megabuild={value!r} is not a variant value the driver knows; "
                             "set it to true or false in recipe/conda_build_config.yaml")
    return value == "true"


def _retarget_split_cache(ctx: BuildContext, frontend: Frontend, target: PythonTarget,
                          cmake: str | None) -> None:
    """megabuild=true: the split build's cache, retargeted from the pristine copy; a CMake it
    names that is gone is replaced by this step's (`cmake`)."""
    with log.step(f"pytorch (megabuild=true): retarget the split build's cache to Python "
                  f"{target.version}"):
        cache = read_sealed(pristine_cache_path(ctx), SPLIT_AGAIN)
        changes = retarget_cache(cache, target)
        for change in changes:
            log.info(f"  {change.describe()}")
        for change in replace_dead_cmake(cache, cmake, ctx.stage_dir, ctx.env) if cmake else []:
            log.info(f"  {change}")
        cache.write(frontend.build_dir(ctx) / "CMakeCache.txt")


def _configure_fresh(ctx: BuildContext, frontend: Frontend, target: PythonTarget) -> None:
    """megabuild=false: drop the build tree's cache so the front end configures CMake again,
    with this step's environment and ctx.python (the pristine copy is never touched)."""
    cache_path = frontend.build_dir(ctx) / "CMakeCache.txt"
    with log.step(f"pytorch (megabuild=false): fresh CMake configure for Python "
                  f"{target.version}, no retargeting"):
        if os.path.lexists(cache_path):
            cache_path.unlink()
            log.info(f"removed {cache_path}; the install configures again against {ctx.python}")
        else:
            log.info(f"no {cache_path}; the install configures against {ctx.python}")


def build_pytorch(ctx: BuildContext, frontend: Frontend | None = None) -> None:
    retarget = megabuild_enabled(ctx)
    pristine = pristine_cache_path(ctx)
    if retarget and not pristine.is_file():
        raise MegabuildError(f"no pristine cache at {pristine}; run the libtorch-split step "
                             "(the top-level build) first")
    # picked after the preconditions: "run the split first" is the more useful first error
    frontend = frontend or select_frontend(ctx.env, ctx.src_dir)
    # refusals first: nothing is written for a foreign stage, build folder or CMake
    if retarget:
        check_stage_source(ctx)
    cmake = check_frontend(frontend, ctx)
    target = PythonTarget.query(ctx.python, ctx.env)
    if retarget:
        _retarget_split_cache(ctx, frontend, target, cmake)
    else:
        _configure_fresh(ctx, frontend, target)
    with log.step(f"pytorch: build and install for Python {target.version}"):
        _wait_past_install_granularity(frontend.build_dir(ctx))
        frontend.install(ctx)
    site_packages = Path(target.platlib)
    torch_dir = site_packages / "torch"
    if not torch_dir.is_dir():
        raise MegabuildError(f"the install left no {torch_dir}; check the front end's output")
    with log.step("pytorch: split files between libtorch and pytorch"):
        (ctx.prefix / "lib").mkdir(parents=True, exist_ok=True)
        for lib in sorted((torch_dir / "lib").glob("libtorch_python*")):
            shutil.copy2(lib, ctx.prefix / "lib" / lib.name)
            log.info(f"copied {lib.name} -> {ctx.prefix / 'lib'}")
        linked = link_into_prefix(torch_dir, ctx.prefix, always=is_cuda_linalg_library)
        log.info(f"replaced {len(linked)} files with symlinks into {ctx.prefix}")
        removed = remove_foreign_pyc(installed_top_levels(site_packages), target.pyc_tag)
        log.info(f"removed {len(removed)} .pyc files not written for {target.pyc_tag}")
        # pip records the build's source folder (file:///.../work) in direct_url.json: a build
        # path that would ship in the package and mean nothing on the user's machine
        for record in sorted(site_packages.glob("*.dist-info/direct_url.json")):
            if "torch/__init__.py" not in (record.parent / "RECORD").read_text(errors="replace"):
                continue  # another package of the environment
            record.unlink()
            log.info(f"removed {record.relative_to(site_packages)} (it names the build folder)")


STEPS = ("libtorch-split", "libtorch", "libtorch-cuda-linalg", "pytorch")
# not a package's step: build-locally.py --develop builds a developer's checkout (develop.py)
DEVELOP_STEP = "develop"
# The steps whose front end runs CMake (run_split, build_pytorch): their host environment must
# hold every package a USE_SYSTEM_* variable points CMake at (checked by `feedstock lint`).
CONFIGURING_STEPS = ("libtorch-split", "pytorch")


def run_step(ctx: BuildContext, frontend: Frontend | None = None,
             base: Mapping[str, str] | None = None) -> None:
    """Run the step for ctx.variant["PKG_NAME"]; `base`: the environment the driver got."""
    name = ctx.variant.get("PKG_NAME", "")
    with log.step(f"{name or '?'} (megabuild driver)"), \
            compile_cache.step_statistics(ctx.env, name or "?"):
        if name == "libtorch-split":
            run_split(ctx, frontend)
        elif name == "libtorch":
            install_libtorch(ctx)
        elif name == "libtorch-cuda-linalg":
            install_cuda_linalg(ctx)
        elif name == "pytorch":
            build_pytorch(ctx, frontend)
        elif name == DEVELOP_STEP:
            from .develop import run_develop

            run_develop(ctx, base or {}, frontend)
        else:
            raise MegabuildError(f"PKG_NAME={name!r} has no megabuild step; expected one of "
                                 f"{', '.join(STEPS)}")
