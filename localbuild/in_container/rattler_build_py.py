#!/usr/bin/env python3
"""rattler-build's `build` (and a channel `index`) through py-rattler-build, for
`build-locally.py --native --tool rattler-build` on a host without the rattler-build executable.

Takes the subset of rattler-build's command line that localbuild/in_container/build_steps.sh passes:

    rattler_build_py.py build --recipe R -m VARIANTS [--ignore-recipe-variants] --output-dir O [-c CH]...
    rattler_build_py.py index DIR
    rattler_build_py.py test --recipe R -m VARIANTS [--ignore-recipe-variants] --output-dir O

`test` runs the tests of the packages the recipe builds for VARIANTS that are already in O
(build-locally.py --test-only), against O and the variant file's channel_sources.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the feedstock's common/

from common.clean_exit import run_command  # noqa: E402


def index_channel(channel: Path) -> None:
    """repodata.json for every subdir of CHANNEL (an empty noarch one too: solvers want it)."""
    import asyncio

    from rattler.index import index_fs

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    result = index_fs(channel)
    if asyncio.iscoroutine(result):
        asyncio.run(result)
    if not (channel / "noarch" / "repodata.json").is_file():
        raise RuntimeError(f"rattler index wrote no {channel / 'noarch' / 'repodata.json'}")


def test_built_packages(recipe: Path, variant_files: list[str], output_dir: Path) -> int:
    """Run every test of the job's packages found in output_dir; 0 if all pass, 1 if one
    fails, 3 if none of the job's packages is there."""
    from rattler_build import Package, Stage0Recipe, VariantConfig

    config = VariantConfig.from_file(variant_files[0])
    for extra in variant_files[1:]:
        config = config.merge(VariantConfig.from_file(extra))
    channels = [str(output_dir)] + [str(c) for c in (config.get("channel_sources") or [])
                                    for c in str(c).split(",") if c]
    wanted = {f"{v.recipe.package.name}-{v.recipe.package.version}-{v.recipe.build.string}.conda"
              for v in Stage0Recipe.from_file(recipe).render(config)}
    found = sorted(path for path in output_dir.glob("*/*.conda") if path.name in wanted)
    if not found:
        print(f"error: none of the {len(wanted)} packages of {Path(variant_files[0]).stem} is in "
              f"{output_dir}; build them first or fetch the build's artifacts", file=sys.stderr)
        return 3
    failed = 0
    for path in found:
        package = Package.from_file(path)
        for index in range(package.test_count):
            try:
                result = package.run_test(index, channel=channels)
                ok, output = result.success, list(result.output)
            except Exception as err:  # a failing test script raises, its output in the message
                ok, output = False, str(err).splitlines()
            print(f"test {'passed' if ok else 'FAILED'}: {path.name} test {index}")
            if not ok:
                failed += 1
                print("\n".join(f"    {line}" for line in output[-25:]))
    print(f"tests: {sum(Package.from_file(p).test_count for p in found) - failed} passed, "
          f"{failed} failed, in {len(found)} package(s)")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rattler_build_py.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a recipe.yaml (rattler-build build)")
    build.add_argument("--recipe", "-r", type=Path, required=True)
    build.add_argument("--variant-config", "-m", action="append", default=[])
    build.add_argument("--ignore-recipe-variants", action="store_true")
    build.add_argument("--output-dir", type=Path, required=True)
    build.add_argument("--channel", "-c", action="append", default=[])
    build.add_argument("--test", choices=("skip", "native", "native-and-emulated"))
    test = commands.add_parser("test", help="test the job's packages already built")
    test.add_argument("--recipe", "-r", type=Path, required=True)
    test.add_argument("--variant-config", "-m", action="append", default=[], required=True)
    test.add_argument("--ignore-recipe-variants", action="store_true")
    test.add_argument("--output-dir", type=Path, required=True)
    index = commands.add_parser("index", help="write repodata.json for a channel folder")
    index.add_argument("channel", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "index":
            index_channel(args.channel)
            return 0
        if args.command == "test":
            return test_built_packages(args.recipe, args.variant_config, args.output_dir)
        from rattler_build.cli_api import build_recipes

        import warnings

        warnings.simplefilter("ignore", DeprecationWarning)  # the one call that shares a staging
        build_recipes([args.recipe], channel=args.channel or None, variant_config=args.variant_config,
                      ignore_recipe_variants=args.ignore_recipe_variants, output_dir=args.output_dir,
                      test=args.test)
    except ImportError as err:
        print(f"error: {err}; install py-rattler-build (requirements-dev.txt)", file=sys.stderr)
        return 3
    except Exception as err:  # rattler-build's own errors: one line, its log went to stderr
        print(f"error: rattler-build failed: {' '.join(str(err).split())[:400]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # py-rattler's threads must not outlive the interpreter's finalization (common/clean_exit.py)
    run_command(main)
