"""Command line of the maintainer tools: ``python -m feedstock {rerender,render,lint,bump,deps,patches,parity,downstream,image}``."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from .atomic_files import feedstock_lock
from .errors import FeedstockError
from .after_build.downstream import cli as downstream_cli
from .before_build.maintain import cli as maintainer_cli

DESCRIPTION = """\
Maintainer tools for this feedstock. The data flow is:
  recipe/conda_build_config.yaml + pinning file  ->  variant matrix per platform
  ->  .ci_support/<config>.yaml (rerender)  ->  rendered outputs of one config (render)
Run from the feedstock root (or pass --feedstock-root) with the test environment's python.
"""

RERENDER_HELP = """\
Regenerate .ci_support/ from recipe/meta.yaml, recipe/conda_build_config.yaml and the pinning
file, as conda-smithy rerender does: one config per CI build, named after the keys that differ.
Also writes the GitHub Actions workflow .github/workflows/build.yml (one build per config):
runner labels per platform and GPU test runners from ci-runners.yml, the timeout and
self_hosted from conda-forge.yml's github_actions:. Unknown keys in ci-runners.yml or under
github_actions:, and unknown provider: platforms or CI services, are errors.
Nothing is written unless every config could be computed; stale configs are removed last.
With --check, write nothing: exit 1 and name every stale, missing or extra file."""

RENDER_HELP = """\
Render recipe/meta.yaml for one .ci_support config and print each output: name, version,
build string, build number, requirements by section, run_exports, tests and script_env (the
variables conda-build passes from the environment into the output's build script).
The build string hash is h + the first 7 hex digits of sha1 over the JSON of the variant
values the output uses (conda-build's recipe), so it changes whenever the variant does.
With --batch FILE (a JSON list of {"config": NAME, "environment": {...}} requests; - reads
standard input), every config in one process: a JSON list with each config's outputs or its
error line; exit 1 when one failed (build-locally's --dry-run renders its plans this way).
Example: python -m feedstock render linux_64_blas_implmkl... --json"""

LINT_HELP = """\
Check the recipe: every selector parses and names known things, every patch listed in
meta.yaml exists and every file under recipe/patches is listed, zip_keys groups have equal
lengths on every platform, every output has a test and no test command negated with '!'
(conda-build's set -e ignores it), .ci_support/ and the workflow are current, build strings
are unique across the matrix, the build driver accepts every config's variant, and every
dependent a channel would carry (recipe/dependents.yaml, channel: true) bounds pytorch and
libtorch from above (a conda-sdist through the run_exports, a wheel through its torch spec).
Prints one line per finding; exit 1 if any."""


PARITY_HELP = """\
Render recipe/meta.yaml (our renderer) and recipe/recipe.yaml (rattler-build's renderer, from
py-rattler-build) for every .ci_support config and compare each output: name, version, build
number, build string without its hash, requirements per section, run_exports, run_constraints,
de-prioritisation and tests. Then, on every platform conda knows (with or without a config), which
outputs each recipe builds and which it skips, variant by variant. One line per difference
(`parity: pytorch on osx-arm64: meta.yaml skips it, recipe.yaml builds it`), exit 1 if any;
the last line is `parity: N configs, M outputs: E equal, D differ; skips on P platforms: S
differ`. Also run by lint."""


IMAGE_HELP = """\
Build a runtime image from a channel of built packages: an OCI layout (DIR/oci), a
docker-archive (DIR/image.tar, for podman/docker load), an Apptainer recipe (DIR/Apptainer.def)
and DIR/image.json (digests). Layers: the base (mmdebstrap's Debian, or --base), torch
(libtorch, libtorch-cuda-linalg, pytorch: the same digest in every image of one build), the
rest of the conda environment at /opt/env (activated through the image config: PATH,
CONDA_PREFIX), and with --requirements the app's packages installed by pip inside the image
with torch already satisfied (a line that would replace torch is refused). --environment
takes a conda environment file instead: its channels in order, its dependencies, and its pip:
section installed after the conda environment exists; a pip line marked --no-build-isolation
(or from git+) is built into a wheel in a build stage (the image's environment plus compilers)
against the image's own torch, and only the wheel enters the image; the wheel is cached by its
inputs (the archive's sha256, the image's conda packages, the build stage's base), so building
the same image again compiles nothing (--no-wheel-cache compiles again); its compiles go
through the build base's ccache (--compile-cache), so compiling again against the same torch
takes the objects from there. Needs umoci and skopeo;
mmdebstrap without --base or with a build stage; podman (or --engine) for the pip steps. Same
inputs and SOURCE_DATE_EPOCH: same manifest digest. See docs/images.md.
Example: python -m feedstock image --channel build_artifacts --channel conda-forge --flavour cpu --python 3.11 --output img
         python -m feedstock image --environment env.yml --find-links wheels/ --output img"""


def _add_image_parser(sub: argparse._SubParsersAction) -> None:
    image = sub.add_parser("image", help="build a runtime image (OCI + docker-archive) from built packages",
                           description=IMAGE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    image.add_argument("--environment", type=Path, metavar="ENV.yml",
                       help="a conda environment file (channels, dependencies, a pip: section) instead of "
                            "--channel/--flavour/--requirements")
    image.add_argument("--channel", action="append", default=[], metavar="DIR|NAME|URL",
                       help="channel to install from, repeatable, in order; the first must hold the flavour")
    image.add_argument("--flavour", choices=("cpu", "gpu", "rocm"))
    image.add_argument("--python", help="the Python version, e.g. 3.11 (unless the environment file pins one)")
    image.add_argument("--output", type=Path, required=True, help="folder to write (must not exist or be empty)")
    image.add_argument("--requirements", type=Path, help="a pip requirements file installed as a layer of its own")
    image.add_argument("--find-links", type=Path, metavar="DIR",
                       help="with --requirements: install from this folder of wheels only (no index)")
    image.add_argument("--base", metavar="TAR|DIR[:REF]", help="a rootfs tar or an OCI layout instead of mmdebstrap's Debian")
    image.add_argument("--host-python", action="append", type=Path, default=[], metavar="EXE",
                       help="copy this CPython's install into the mmdebstrap base at its own path "
                            "(channels whose python is a virtual environment of it, as the test channel)")
    image.add_argument("--engine", default="podman", help="runs pip inside the image (default: podman)")
    image.add_argument("--pip-cert", type=Path, metavar="PEM",
                       help="CA bundle for the pip steps (else PIP_CERT); mounted, never written into a layer")
    image.add_argument("--name", help="image name:tag (default: localhost/pytorch-FLAVOUR:VERSION-pyXY)")
    image.add_argument("--pkgs-dir", type=Path, metavar="DIR",
                       help="package cache kept between runs (default: a fresh one per run, removed after)")
    image.add_argument("--cuda", default="13.0", help="__cuda the gpu flavour is solved for (default: 13.0)")
    image.add_argument("--no-wheel-cache", dest="wheel_cache", action="store_false",
                       help="compile the build stage's packages again instead of taking their wheels from "
                            "the cache (~/.cache/pytorch-feedstock/stand-in-image/build-stage-wheels, or "
                            "FEEDSTOCK_IMAGE_CACHE/build-stage-wheels)")
    image.add_argument("--wheel-cache", dest="wheel_cache_dir", type=Path, metavar="DIR",
                       help="where the build stage keeps the wheels it built (default: "
                            "~/.cache/pytorch-feedstock/stand-in-image/build-stage-wheels)")
    image.add_argument("--compile-cache", type=Path, metavar="DIR",
                       help="ccache's folder for the build stage's compiles, mounted into it (default: "
                            "~/.cache/pytorch-feedstock/ccache): a package compiled again against the same "
                            "torch compiles from it")
    image.add_argument("--no-compile-cache", action="store_true", help="compile the build stage without ccache")


def _wheel_cache_dir(args: argparse.Namespace) -> Path | None:
    if args.wheel_cache_dir is not None and not args.wheel_cache:
        raise FeedstockError(f"--wheel-cache {args.wheel_cache_dir} and --no-wheel-cache contradict each other; give one")
    if args.wheel_cache_dir is not None and args.wheel_cache_dir.exists() and not args.wheel_cache_dir.is_dir():
        raise FeedstockError(f"--wheel-cache {args.wheel_cache_dir}: not a folder; give a folder for the built wheels")
    return args.wheel_cache_dir


def _cmd_image(args: argparse.Namespace) -> int:
    from .after_build import compile_cache as compiles
    from .after_build.image.build import ImageRequest, build

    start = time.perf_counter()
    result = build(ImageRequest(channels=args.channel, flavour=args.flavour, python=args.python, output=args.output,
                           requirements=args.requirements, base=args.base, host_pythons=args.host_python,
                           find_links=args.find_links, engine=args.engine, name=args.name, cuda=args.cuda,
                           pkgs_dir=args.pkgs_dir, environment=args.environment, pip_cert=args.pip_cert,
                           wheel_cache=args.wheel_cache, wheel_cache_dir=_wheel_cache_dir(args),
                           compile_cache=compiles.choose(args.compile_cache, args.no_compile_cache,
                                                         host_ccache=False)),
                   say=lambda line: print(line, flush=True))  # progress reaches a log as it happens
    for role, digest in result.layers.items():
        print(f"layer {role:<12} {digest}")
    print(f"image: {result.name} in {result.output} (manifest {result.manifest_digest}, "
          f"{time.perf_counter() - start:.0f}s)")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m feedstock", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--feedstock-root", type=Path, default=Path.cwd(),
                        help="the feedstock folder (default: the current directory)")
    sub = parser.add_subparsers(dest="command", metavar="{rerender,render,lint,bump,deps,patches,parity,downstream,image}")
    rerender = sub.add_parser("rerender", help="regenerate .ci_support/ (or --check it)",
                              description=RERENDER_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    rerender.add_argument("--check", action="store_true", help="write nothing; exit 1 if .ci_support/ or the workflow is out of date")
    render = sub.add_parser("render", help="render the recipe for one .ci_support config",
                            description=RENDER_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    render.add_argument("config", nargs="?", help="config name (file name in .ci_support/ with or without .yaml)")
    render.add_argument("--json", action="store_true", help="print JSON (a list of outputs) instead of text")
    render.add_argument("--batch", metavar="FILE", help="render the configs a JSON list of requests names "
                        "(- : standard input), in one process; prints JSON")
    sub.add_parser("lint", help="check the recipe, patches, zip_keys, tests and .ci_support/",
                   description=LINT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    maintainer_cli.add_parsers(sub)
    sub.add_parser("parity", help="compare meta.yaml and recipe.yaml output by output, for every config",
                   description=PARITY_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    downstream_cli.add_parser(sub)
    _add_image_parser(sub)
    return parser


def _cmd_rerender(root: Path, check_only: bool) -> int:
    from .before_build.ci.rerender import check, rerender

    start = time.perf_counter()
    if check_only:
        drift = check(root)
        if drift.clean:
            print(f"rerender --check: .ci_support/ and the CI workflow are up to date "
                  f"({time.perf_counter() - start:.2f}s)")
            return 0
        for line in drift.lines():
            print(line)
        print("error: generated CI files are out of date; run: python -m feedstock rerender", file=sys.stderr)
        return 1
    jobs, drift = rerender(root)
    for name in drift.missing:
        print(f"new      .ci_support/{name}")
    for name in drift.stale:
        print(f"changed  .ci_support/{name}")
    for name in drift.extra:
        print(f"removed  .ci_support/{name}")
    for path in drift.leftovers:
        print(f"removed  {path} (left by an interrupted rerender)")
    for path, state in drift.other.items():
        print(f"{'new' if state == 'missing' else 'changed':<8} {path}")
    print(f"rerender: {len(jobs)} configs in .ci_support/ ({len(drift.stale) + len(drift.missing)} written, "
          f"{len(drift.extra)} removed, {time.perf_counter() - start:.2f}s)")
    return 0


def _cmd_render(root: Path, config: str | None, as_json: bool, batch: str | None) -> int:
    if batch is not None:
        if config is not None:
            raise FeedstockError(f"render takes a CONFIG or --batch FILE, not both ({config!r} and --batch {batch})")
        from .before_build import render_batch

        return render_batch.run(root, batch)
    if config is None:
        raise FeedstockError("render needs a CONFIG (a .ci_support name), or --batch FILE")
    from .before_build.render.outputs import format_outputs, render_ci_config

    outputs = render_ci_config(root, config)
    if as_json:
        print(json.dumps([o.to_dict() for o in outputs], indent=2))
    else:
        print(format_outputs(outputs))
    return 0


def _cmd_lint(root: Path) -> int:
    from .before_build.checks.lint import lint

    findings = lint(root)
    for finding in findings:
        print(finding)
    if findings:
        print(f"lint: {len(findings)} finding(s)", file=sys.stderr)
        return 1
    print("lint: no findings")
    return 0


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (a scheduler, a CI timeout) cleans up as Ctrl-C does


def main(argv: list[str] | None = None) -> int:
    # first: SIGTERM (a scheduler, a CI timeout) is Ctrl-C from here on, one line and 130
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _only_reads(args: argparse.Namespace) -> bool:
    """The read-only forms of the commands that can write the feedstock's files."""
    if args.command == "rerender":
        return bool(args.check)
    return maintainer_cli.only_reads(args)


def _main(argv: list[str] | None) -> int:
    try:
        parser = _parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("error: python -m feedstock interrupted", file=sys.stderr)
        return 130
    if not args.command:
        parser.print_help()
        return 2
    try:
        # the commands that write the feedstock's files: one at a time (a second one waits); their
        # read-only forms (rerender --check, patches check, ...) only wait for a writer
        locks = args.command == "rerender" or args.command in maintainer_cli.COMMANDS
        with feedstock_lock(args.feedstock_root, args.command, _note, shared=_only_reads(args)) if locks \
                and Path(args.feedstock_root).is_dir() else contextlib.nullcontext():
            if args.command == "rerender":
                return _cmd_rerender(args.feedstock_root, args.check)
            if args.command in maintainer_cli.COMMANDS:
                return maintainer_cli.run(args, args.feedstock_root)
        if args.command == "render":
            return _cmd_render(args.feedstock_root, args.config, args.json, args.batch)
        if args.command == "image":
            return _cmd_image(args)
        if args.command == "parity":
            from .before_build.checks.parity import run as run_parity
            return run_parity(args.feedstock_root)
        if args.command == "downstream":
            return downstream_cli.run(args, args.feedstock_root)
        return _cmd_lint(args.feedstock_root)
    except FeedstockError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's convention, not a traceback
        print(f"error: python -m feedstock {args.command} interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: what it read is all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
