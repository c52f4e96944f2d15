"""rattler-build builds the feedstock's own recipe/recipe.yaml against the local toolchain channel.

`build_feedstock` copies recipe/ (recipe.yaml, build.sh, the driver, cmake_test) to a work
folder, overrides the recipe's `source:` with a local path (the PyTorch-shaped test project, or
a tree the wheel front end fills), and runs rattler-build once for all outputs of one job, as
`rattler-build build -m .ci_support/<job>.yaml` does: one invocation, so the staging output runs
once and the outputs inherit its work directory (recipe/README.md, "rattler-build").
Before building, every requirement name is looked up in the channel: a missing one is one
`ChannelIncomplete` line naming it, instead of a solver dump after minutes of work.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.feedstock_copy import copy_feedstock
from tests.support.toolchain import REPO_ROOT, index_channel, needed_requirements

RECIPE_DIR = REPO_ROOT / "recipe"


class ChannelIncomplete(Exception):
    """The local channel lacks a package the recipe needs (str() names it)."""


class BuildFailed(Exception):
    """rattler-build failed; str() is one line, the log is in the output folder."""


@dataclass
class FeedstockBuild:
    output_dir: Path
    packages: list[Path]
    seconds: float

    def names(self) -> list[str]:
        return sorted(p.name for p in self.packages)


def replace_source(recipe_text: str, body: str) -> str:
    """The recipe (recipe.yaml or meta.yaml) with its top-level `source:` block's lines replaced
    by ``body`` (indented lines; patches dropped: they are for the PyTorch tarball)."""
    block = re.compile(r"^source:\n(?:[ #].*\n|\n)*", re.MULTILINE)
    if not block.search(recipe_text):
        raise ValueError("the recipe has no top-level source: block to override")
    return block.sub(lambda _: f"source:\n{body}\n", recipe_text, count=1)


def override_source(recipe_text: str, source: Path) -> str:
    """recipe.yaml with its top-level `source:` block replaced by a local path."""
    return replace_source(recipe_text, f"  path: {json.dumps(str(source))}\n")


def copy_recipe(dest: Path, source: Path, recipe_dir: Path = RECIPE_DIR) -> Path:
    """recipe_dir (the feedstock's recipe/, or a bumped copy's) copied to dest with the source
    overridden; returns dest/recipe.yaml."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(recipe_dir, dest, ignore=shutil.ignore_patterns("__pycache__", "output"))
    recipe = dest / "recipe.yaml"
    recipe.write_text(override_source(recipe.read_text(), source))
    return recipe


def prepare_project_source(dest: Path, frontend: str = "setup.py") -> Path:
    """A copy of tests/support/megabuild_project in `frontend`'s shape (setup.py, or PyTorch
    2.14+'s scikit-build-core form) with the LICENSE and NOTICE files the recipe's license_file
    asks for (the PyTorch tarball has both)."""
    from tests.support.megabuild_harness import copy_project

    if dest.exists():
        shutil.rmtree(dest)
    copy_project(dest, frontend)
    (dest / "LICENSE").write_text("BSD-3-Clause: the feedstock's PyTorch-shaped test project "
                                  "(tests/support/megabuild_project), not PyTorch itself.\n")
    (dest / "NOTICE").write_text("Test project of pytorch-feedstock; contains no PyTorch code.\n")
    return dest


def write_reproducible_tarball(tarball: Path, tree: Path) -> None:
    """`tree` packed as `<tree's name>/` in a .tar.gz whose bytes depend on the files alone (no
    times, owners or gzip stamp): its sha256, which the bump writes into the recipe, is the same
    in every run, so the bumped recipe can key the machine's package cache."""
    def same_everywhere(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    with tarball.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(tree, arcname=tree.name, filter=same_everywhere)


def bumped_feedstock(work: Path, wheel: Path, version: str) -> tuple[Path, Path]:
    """(feedstock copy bumped to `version`, the stand-in source tree the tarball was made of).

    `python -m feedstock bump` moves the copy to the wheel's release, older or the same one
    included (`--allow-older`: the CPU wheel is 2.13.0, the recipe is newer). The source is a
    stand-in tarball (the PyTorch-shaped test project packed as `pytorch-v<version>/`): the wheel
    front end supplies the payload, so the release tarball, which is not reachable here, is not
    needed; `--skip-patch-check` for the same reason (the front end applies the patches to the
    files the wheel carries)."""
    source = prepare_project_source(work / "source" / f"pytorch-v{version}")
    (source / "STAND-IN.txt").write_text(
        f"Stand-in for the pytorch-v{version} release tarball: the feedstock's PyTorch-shaped test "
        f"project. The payload comes from {wheel.name} through the wheel front end.\n")
    tarball = work / f"pytorch-v{version}.tar.gz"
    write_reproducible_tarball(tarball, source)
    root = copy_feedstock(work / "feedstock")
    proc = run_feedstock_cli("bump", version, "--source", str(tarball), "--wheel", str(wheel),
                             "--skip-patch-check", "--allow-older", root=root)
    if proc.returncode != 0:
        raise RuntimeError(f"bump failed: {proc.stdout}{proc.stderr}")
    return root, source


def channel_names(*channels: Path) -> set[str]:
    names: set[str] = set()
    for channel in channels:
        index_channel(channel)
    for repodata in (r for channel in channels for r in channel.glob("*/repodata.json")):
        data = json.loads(repodata.read_text())
        for key in ("packages", "packages.conda"):
            names |= {record["name"] for record in (data.get(key) or {}).values()}
    return names


def check_channel(recipe: Path, variant_file: Path, channel: Path, extra_channels: tuple[Path, ...] = ()) -> None:
    """Every build/host/run/test requirement of the job resolves to a name the channels have."""
    available = channel_names(channel, *extra_channels)
    missing = sorted(name for name in needed_requirements(recipe, variant_file) if name not in available)
    if missing:
        raise ChannelIncomplete(f"the local channel {channel} has no package {missing[0]!r}"
                                + (f" (nor {', '.join(missing[1:])})" if missing[1:] else "")
                                + f", which {recipe.name} needs for {variant_file.stem}; "
                                "build it into the toolchain channel first")


def failed_test_output(output_dir: Path, channels: list[Path], lines: int = 25) -> str:
    """The end of the output of each failing test of the packages rattler-build moved to
    broken/ (its own log does not reach Python): rerun them, keep the failures' last lines."""
    from rattler_build import Package

    report = []
    for path in sorted((output_dir / "broken").glob("*.conda")):
        package = Package.from_file(path)
        for index in range(package.test_count):
            try:
                result = package.run_test(index, channel=[str(c) for c in channels])
                ok, output = result.success, list(result.output)
            except Exception as err:  # a failing script raises with the output in its message
                ok, output = False, str(err).splitlines()
            if not ok:
                report.append(f"\n--- {path.name}, test {index}:\n" + "\n".join(output[-lines:]))
    return "".join(report)


def failed_script_output(output_dir: Path, lines: int = 15) -> str:
    """The end of the newest build script log under output_dir/bld (a failing build step's
    traceback or error line; rattler-build's own log does not reach Python)."""
    logs = sorted(output_dir.glob("bld/*/work/conda_build.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return ""
    tail = logs[-1].read_text(errors="replace").splitlines()[-lines:]
    return f"\n--- {logs[-1]}:\n" + "\n".join(tail)


def build_feedstock(recipe: Path, variant_file: Path, channel: Path, output_dir: Path, *,
                    test: str = "skip", environ: dict[str, str] | None = None,
                    extra_channels: tuple[Path, ...] = (), keep_build: bool = False) -> FeedstockBuild:
    """All outputs of recipe.yaml for one job, in one rattler-build run; tests per `test`.
    `keep_build` keeps each output's work folder (bld/*/work, with its conda_build.log)."""
    from rattler_build.cli_api import build_recipes

    check_channel(recipe, variant_file, channel, extra_channels)
    channels = [channel, *extra_channels]
    before = {p for p in output_dir.glob("*/*.conda")} if output_dir.exists() else set()
    # the outputs' tests (PyTorch's own test files) may run inductor, which keeps its precompiled
    # headers under tempfile's folder whatever its cache dir: a short folder of this build's, gone
    # after it (CI's /tmp is shared and left as found; short: the tests make sockets there)
    scratch = tempfile.mkdtemp(prefix="feedstock-rb-")
    environ = {**(environ or {}), "TMPDIR": scratch}
    saved = {k: os.environ.get(k) for k in environ}
    os.environ.update(environ)  # recipe.yaml reads the developer overrides with env.get
    start = time.monotonic()
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the one call that shares a staging
            build_recipes([recipe], channel=[str(c) for c in channels], variant_config=[str(variant_file)],
                          ignore_recipe_variants=True, output_dir=output_dir, test=test,
                          package_format="conda:1", compression_threads=2, keep_build=keep_build)
    except Exception as err:
        log = output_dir / "rattler-build-log.txt"
        raise BuildFailed(f"rattler-build failed for {variant_file.stem}: "
                          f"{' '.join(str(err).split())[:300]} (log: {log})"
                          f"{failed_test_output(output_dir, [output_dir, *channels]) or failed_script_output(output_dir)}"
                          ) from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.monotonic() - start
    packages = sorted(p for p in output_dir.glob("*/*.conda") if p not in before)
    return FeedstockBuild(output_dir=output_dir, packages=packages, seconds=seconds)
