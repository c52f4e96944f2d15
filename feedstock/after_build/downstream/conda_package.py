"""kinds conda-sdist and conda-wheel: rattler-build makes a conda package of the dependent's
PyPI file against our packages, then `package_depends` reads what it ended up depending on.

The recipe is written here from the catalog entry (JSON is YAML): an sdist is built with
`pip install . --no-build-isolation` against our pytorch and libtorch in host, so their
run_exports pin the package to the same x.y; a wheel is repackaged noarch: python. The
dependent's tests are embedded in the package (a rattler-build `downstream:` test of our
recipe runs them), but the build itself skips them: the caller runs them in a fresh environment
to count them."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import time
import zipfile
from pathlib import Path
from typing import Iterator

from common.atomic_files import atomic_path
from common.interrupts import interrupt_after_call

from .. import compile_cache as compiles
from ...dependents_catalog import Dependent
from .channel import TorchBuild
from .environment import cuda_of
from .testrun import first_line

_ERROR = re.compile(r"(?:^|\s)(?:error|ERROR|Error)(?::|\s)")


class BuildFailed(Exception):
    """str(): one line, the first error line of the build log. `unsolvable`: rattler-build could
    not even make its build/host environments (a channel is missing: not the dependent's fault)."""

    def __init__(self, message: str, unsolvable: bool = False) -> None:
        super().__init__(message)
        self.unsolvable = unsolvable


# ccache in front of the build environment's C and C++ compilers (compile_cache.py): a wrapper
# of the compiler's own name in a folder of the build's, so torch's extension builder sees the
# name it expects. CCACHE_BASEDIR: rattler-build's build folder (work/ and the prefixes below it)
CCACHE_LINES = [
    'wrapped="$SRC_DIR/../ccache-bin"; mkdir -p "$wrapped"',
    'for name in CC CXX; do real="$(command -v "${!name:-}" || true)"; [ -n "$real" ] || continue; '
    'printf \'#!/bin/sh\\nexec "%s" "%s" "$@"\\n\' "$FEEDSTOCK_CCACHE" "$real" > "$wrapped/${real##*/}"; '
    'chmod +x "$wrapped/${real##*/}"; export "$name=$wrapped/${real##*/}"; done',
    'export CCACHE_BASEDIR="$(cd "$SRC_DIR/.." && pwd)"',
]


def recipe_for(dependent: Dependent, build: TorchBuild, source: Path, test_files: list[Path],
               compile_env: dict[str, str] | None = None) -> dict:
    """The rattler-build recipe; with compile_env (compile_cache.environment plus FEEDSTOCK_CCACHE,
    ccache's path), an sdist's compiles go through ccache."""
    tests: list[dict] = [{"python": {"imports": list(dependent.imports), "pip_check": False}}] if dependent.imports else []
    test_cmd = ("pytest -q -p no:cacheprovider " + ("--pyargs " + " ".join(dependent.test_pyargs)
                                                     if dependent.test_pyargs else " ".join(f.name for f in test_files)))
    env_prefix = " ".join(f"{k}={v}" for k, v in dependent.test_env.items())
    tests.append({"files": {"recipe": [f.name for f in test_files]} if test_files else {},
                  "requirements": {"run": ["pytest", "pytorch", *dependent.test_requires]},
                  "script": [f"{env_prefix} {test_cmd}".strip()]})
    if not test_files:
        del tests[-1]["files"]
    about = {"summary": f"{dependent.name} {dependent.version} from PyPI ({source.name}), built by "
                        "pytorch-feedstock's downstream check", "license": "LicenseRef-see-upstream"}
    if dependent.kind == "conda-sdist":
        string = f"{torch_tag(build)}py{build.python.replace('.', '')}_h${{{{ hash }}}}_0"
        return {
            "package": {"name": dependent.name, "version": dependent.version},
            "source": {"url": source.resolve().as_uri(), "sha256": dependent.source.sha256},
            # the torch x.y and the Python it was built for in the build string: a rebuild against
            # another torch is another file, never one a package cache could mistake for this one
            "build": {"number": 0, "string": string, "script": {
                "env": {"MAX_JOBS": "2", **dependent.build_env, **(compile_env or {})},
                # setuptools builds an sdist's extensions one after another; an extra distutils
                # config (DIST_EXTRA_CONFIG) lets it build MAX_JOBS of them at once
                "content": [*(CCACHE_LINES if compile_env else []), "printf '[build_ext]\\nparallel = %s\\n' \"$MAX_JOBS\" > \"$SRC_DIR/.parallel-build.cfg\"",
                            'DIST_EXTRA_CONFIG="$SRC_DIR/.parallel-build.cfg" '
                            "python -m pip install . --no-deps --no-build-isolation -vv"]}},
            "requirements": {
                "build": ["${{ compiler('c') }}", "${{ compiler('cxx') }}"],
                # pytorch and libtorch by name: their run_exports pin the package to this x.y
                "host": [f"python {build.python}.*", "pip", "setuptools",
                         f"pytorch =={build.version} {build.build}", f"libtorch =={build.version}"],
                "run": ["python"]},
            "tests": tests, "about": about}
    return {
        "package": {"name": dependent.name, "version": dependent.version},
        "source": {"url": source.resolve().as_uri(), "sha256": dependent.source.sha256, "file_name": source.name},
        "build": {"number": dependent.build_number, "noarch": "python",
                  "script": [f"python -m pip install ./{source.name} --no-deps --no-build-isolation -vv"]},
        # the catalog's torch spec bounds pytorch without requiring it (a channel's upper bound)
        "requirements": {"host": ["python", "pip"], "run": ["python"] + _wheel_requires(source),
                         "run_constraints": [f"pytorch {dependent.torch}"]},
        "tests": tests, "about": about}


def torch_tag(build: TorchBuild) -> str:
    """`pt213` for pytorch 2.13.x."""
    return "pt" + "".join(build.version.split(".")[:2])


def _wheel_requires(wheel: Path) -> list[str]:
    """Requires-Dist without extras or markers, as conda specs (einops has none)."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    specs = []
    for line in lines:
        if line.startswith("Requires-Dist:") and ";" not in line:
            req = line.split(":", 1)[1].strip()
            name, _, rest = req.partition(" ")
            name = "pytorch" if name.lower() == "torch" else name.lower()  # conda's name for torch
            specs.append(f"{name} {rest.strip('() ')}".strip())
    return specs


def first_error(output_dir: Path, fallback: str) -> str:
    """The first error line of the newest build log under output_dir/bld (the compiler's or
    pip's), else the first line of rattler-build's own message."""
    logs = sorted(output_dir.glob("bld/*/work/conda_build.log"), key=lambda p: p.stat().st_mtime)
    for line in (logs[-1].read_text(errors="replace").splitlines() if logs else []):
        if _ERROR.search(line):
            return line.strip()[:240]
    return first_line(fallback)[:240]


def cache_key(recipe_text: str, test_files: list[Path], build: TorchBuild, variant: Path | None) -> str:
    """What a built package depends on: its recipe and test files, the variant file, and the exact
    pytorch package file it was built against (its sha256: a rebuilt pytorch of the same name is
    another key). '' when the channel gave no sha256 (no caching)."""
    if not build.sha256:
        return ""
    digest = hashlib.sha256(recipe_text.encode())
    for path in [*test_files, *([variant] if variant else [])]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(f"{build.version} {build.build} {build.sha256}".encode())
    return digest.hexdigest()[:24]


def _from_cache(cached: Path, output_dir: Path) -> Path:
    """The cached package copied into output_dir/<subdir>/, indexed as a channel there."""
    from .channel import index

    target = output_dir / cached.parent.name / cached.name
    shutil.rmtree(output_dir, ignore_errors=True)
    target.parent.mkdir(parents=True)
    shutil.copy2(cached, target)
    (output_dir / "noarch").mkdir(exist_ok=True)
    index(output_dir)
    return target


def _to_cache(package: Path, entry: Path) -> None:
    """Copy under entry/<subdir>/ through a temporary name: a cut-off copy never takes the name."""
    final = entry / package.parent.name / package.name
    with atomic_path(final) as partial:
        shutil.copy2(package, partial)


def build_package(dependent: Dependent, build: TorchBuild, source: Path, test_files: list[Path],
                  channels: list[Path], work: Path, variant: Path | None,
                  cache: Path | None = None, compile_cache: Path | None = None) -> tuple[Path, float]:
    """(the .conda file, seconds); BuildFailed with the first error line. With `cache`, a package
    built before from the same inputs (cache_key) is taken from cache/packages/ instead. With
    `compile_cache` (a folder), an sdist's compiles go through ccache, and one line says how many
    came from it."""
    folder = work / "recipe"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for test_file in test_files:
        shutil.copy2(test_file, folder / test_file.name)
    recipe = folder / "recipe.yaml"
    plain = json.dumps(recipe_for(dependent, build, source, test_files), indent=1)
    stats_log = work / "ccache-stats.log"
    stats_log.unlink(missing_ok=True)
    compile_env = None
    if compile_cache is not None and dependent.kind == "conda-sdist":
        # CCACHE_BASEDIR is set by the script: rattler-build's build folder
        compile_env = {**compiles.environment(compile_cache, str(stats_log)),
                       "FEEDSTOCK_CCACHE": compiles.ccache_on_path() or "ccache"}
    recipe.write_text(json.dumps(recipe_for(dependent, build, source, test_files, compile_env), indent=1)
                      if compile_env else plain)
    output_dir = work / "output"
    start = time.monotonic()
    # the key of the recipe without the compile cache: using it or not makes the same package
    key = cache_key(plain, test_files, build, variant) if cache else ""
    entry = cache / "packages" / key if key else None
    hits = sorted(entry.glob("*/*.conda")) if entry else []
    if hits:
        print(f"downstream: {dependent.name} against {build.describe()}: built before from the same inputs "
              f"({hits[0]})", file=sys.stderr, flush=True)
        return _from_cache(hits[0], output_dir), time.monotonic() - start
    try:
        with _cuda_overridden(cuda_of(build)):
            packages = _rattler_build(recipe, variant, channels, output_dir, dependent)
    finally:
        if compile_env:
            print(f"downstream: {dependent.name} against {build.describe()}: "
                  f"{compiles.count_compiles(stats_log).line()} (ccache in {compile_cache})", file=sys.stderr, flush=True)
    if entry:
        _to_cache(packages[0], entry)
    return packages[0], time.monotonic() - start


@contextlib.contextmanager
def _cuda_overridden(cuda: str | None) -> Iterator[None]:
    """CONDA_OVERRIDE_CUDA for the block: a GPU pytorch depends on __cuda, and rattler-build's
    host solve needs it even without a driver."""
    saved = os.environ.get("CONDA_OVERRIDE_CUDA")
    if cuda:
        os.environ["CONDA_OVERRIDE_CUDA"] = cuda
    try:
        yield
    finally:
        if cuda and saved is None:
            os.environ.pop("CONDA_OVERRIDE_CUDA", None)
        elif cuda:
            os.environ["CONDA_OVERRIDE_CUDA"] = saved


def _rattler_build(recipe: Path, variant: Path | None, channels: list[Path], output_dir: Path,
                   dependent: Dependent) -> list[Path]:
    """The packages rattler-build made of the recipe; BuildFailed with its first error line."""
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    try:
        # a Ctrl-C or SIGTERM raised inside its log callback would become this build's error
        # and the run would go on with the next dependent: it arrives after the call instead
        with interrupt_after_call():
            results = Stage0Recipe.from_file(recipe).run_build(
                variant_config=VariantConfig.from_file(variant) if variant else None,
                tool_config=ToolConfiguration(test_strategy="skip", compression_threads=2),
                output_dir=output_dir, channels=[str(c) for c in channels], package_format="conda:1")
    except Exception as err:  # rattler-build raises one error type per failing stage
        message = first_error(output_dir, str(err))
        unsolvable = "resolve dependencies" in message
        if unsolvable:  # its solver's detail goes to its log only
            message += (f" for {dependent.name}'s build/host requirements: a channel with the compilers, "
                        "python, pip and setuptools is missing (--with-channel)")
        raise BuildFailed(message, unsolvable) from None
    packages = [Path(p) for result in results for p in result.packages]
    if not packages:
        raise BuildFailed("rattler-build built no package")
    return packages


def package_depends(package: Path) -> list[str]:
    """info/index.json's depends of a .conda file (run requirements plus run_exports)."""
    from rattler_build import Package

    return [str(d) for d in Package.from_file(package).depends]
