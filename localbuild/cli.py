"""Command line of build-locally.py."""
from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import time
from pathlib import Path

from common.interrupts import interrupt_name, raise_interrupt, take_interrupts

from . import engine as engines
from . import rattler
from .build_plan import MARKER_PREFIX
from .configs import CiConfig, config_names, load_config
from .console import Console
from .errors import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_USAGE, LocalBuildError
from .gpu_archs import check_arch_options_apply, check_gpu_tests_apply
from .options import Options, default_cpu_count
from .ownership import hand_back, host_user_id
from .plan import make_plan
from .request import BuildRequest, request_from_arguments
from .selection import apply_filters, compile_filters, menu, select
from .source_tarball import check_tarball
from .tokens import UPLOAD_CREDENTIALS

DESCRIPTION = """\
Build the feedstock's .ci_support configs locally: Linux configs in their Docker (or Podman)
image, or natively with --native. Several configs run as a batch: finished configs (done-marker
build_artifacts/conda-forge-build-done-<config>) are skipped, each config logs to
build_artifacts/<config>-log.txt, a failure does not stop the others, a summary ends the run.
One run at a time per build_artifacts/: a second run (another terminal, or another machine on a
shared filesystem) waits for the first to finish, saying whose run it waits for."""

EPILOG = """\
examples:
  build-locally.py                          list configs and ask (on a terminal)
  build-locally.py linux_64_cuda...         one config
  build-locally.py --all --filter gpu_backendcuda   every CUDA config (names matching the regex)
  build-locally.py --dry-run --all          what would run: image, command, environment, outputs
  build-locally.py CONFIG --python 3.12 --cuda-arch 9.0 --compile-cache ~/.ccache   fast dev build
  build-locally.py --all --compile-cache redis://cache.example.org:6379   share objects between machines
  build-locally.py --all --scheduler slurm --partition gpu --gpus 1 --time 12:00:00 --wait
                                            a Slurm job array: one task per config (--native),
                                            one final job indexing the channel (docs/more-machines.md)
  build-locally.py CONFIG --engine apptainer            in the config's image through Apptainer
  build-locally.py CONFIG --develop ~/src/pytorch       your checkout, in CONFIG's environment;
                                            again after an edit: only what changed recompiles

environment:
  CPU_COUNT                     cores the build may use (default: all usable cores)
  DOCKER_EXECUTABLE             container engine (docker, podman); --engine wins; neither:
                                docker, or podman if only podman is on PATH
  CONDA_FORGE_DOCKER_RUN_ARGS   extra arguments for `docker run`
  BINSTAR_TOKEN / ANACONDA_API_TOKEN  passed into the build only with --upload
  FEEDSTOCK_COMPILE_CACHE_PASSWORD    the compile cache's password, passed by name only
  SLURM_CONF                    with --scheduler slurm: which cluster sbatch talks to

exit status:
  0 all selected configs built (or were already built)   1 a config failed
  2 bad arguments / unknown config / nothing to build    3 preflight: no engine or build tool,
  too little disk, CPU_COUNT above the cores, no Slurm; or the engine stopped answering
  mid-batch (the summary names what was built)           4 --no-wait and another run holds
  the build_artifacts/ lock                              130 interrupted (Ctrl-C, SIGTERM),
  129 hung up (SIGHUP: the terminal closed; nohup or tmux keep a run going)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="build-locally.py", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    pick = parser.add_argument_group("selecting configs")
    pick.add_argument("configs", nargs="*", metavar="CONFIG",
                      help="config name(s) from .ci_support/ (without .yaml)")
    pick.add_argument("--all", action="store_true", help="every config (after --filter)")
    pick.add_argument("--filter", action="append", default=[], metavar="REGEX",
                      help="configs whose name matches REGEX; repeat to narrow further "
                           "(selects all matches, like --all)")
    pick.add_argument("--list", action="store_true",
                      help="print the configs with a short description and exit")

    batch = parser.add_argument_group("batch")
    batch.add_argument("--force", action="store_true",
                       help="rebuild configs whose done-marker exists")
    batch.add_argument("--keep-going", action=argparse.BooleanOptionalAction, default=True,
                       help="continue with the next config after a failure (default: yes)")
    batch.add_argument("--prune", action="store_true",
                       help="run `docker system prune --force` between configs (frees disk; "
                            "kept containers of failed builds survive)")
    batch.add_argument("--zip-logs", action="store_true",
                       help="zip the logs and the summary into build_artifacts/build-logs-*.zip")
    batch.add_argument("--downstream", action="store_true",
                       help="after the batch, build and test the dependents of "
                            "recipe/dependents.yaml against build_artifacts/ (python -m feedstock "
                            "downstream; needs the feedstock's .venv)")
    batch.add_argument("--dry-run", action="store_true",
                       help="print image, command, environment, outputs, marker and log of each "
                            "config; run nothing (takes no lock)")
    batch.add_argument("--no-wait", action="store_true",
                       help="if another run holds the build_artifacts/ lock, exit 4 at once "
                            "(saying whose run) instead of waiting for it")

    backend = parser.add_argument_group("where to build")
    backend.add_argument("--engine", metavar="EXE",
                         help="container engine: docker (default; podman when it is on PATH and docker is "
                              "not), podman, apptainer (or singularity: `apptainer exec` of "
                              "docker://IMAGE, for HPC sites without Docker) or a path "
                              "(default from DOCKER_EXECUTABLE)")
    backend.add_argument("--apptainer-image", metavar="SIF",
                         help="with --engine apptainer: this local SIF instead of "
                              "docker://<the config's docker_image> (e.g. a site's copy)")
    backend.add_argument("--native", action="store_true",
                         help="build on this host with its conda-build (or rattler-build if the "
                              "recipe has recipe.yaml) instead of a container")
    backend.add_argument("--tool", choices=rattler.TOOLS,
                         help="the conda build tool: conda-build (default; with --native: the one "
                              "installed) or rattler-build (recipe/recipe.yaml; --native runs the "
                              "rattler-build on PATH or py-rattler-build in $RATTLER_BUILD_PYTHON "
                              "or .venv)")
    backend.add_argument("--channel", action="append", metavar="NAME|URL|DIR",
                         help="build against this channel instead of the config's "
                              "channel_sources (repeat for several, in order; a local folder "
                              "is mounted into the container at the same path), e.g. a site "
                              "mirror or a local channel")
    backend.add_argument("--source-tarball", metavar="FILE",
                         help="the recipe's source tarball, fetched where the network reaches, for "
                              "build machines without it: checked against the recipe's sha256 "
                              "before anything starts, then read by the build instead of a "
                              "download (conda-build: its source cache; rattler-build: a copy of "
                              "recipe/ in build_artifacts/localbuild/ whose first url is this "
                              "file); "
                              "the recipe itself is not changed")
    backend.add_argument("--skip-tests", action="store_true",
                         help="build without running the packages' tests (conda-build "
                              "--no-test, rattler-build --test skip); a quick check build")
    backend.add_argument("--emulate", action="store_true",
                         help="also build Linux configs whose image is for another CPU "
                              "architecture (needs qemu binfmt / Rosetta; very slow)")
    backend.add_argument("--gpu-tests", action="store_true",
                         help="give GPU configs the host GPU for their tests (docker --gpus all; "
                              "ROCm: /dev/kfd, /dev/dri; apptainer: --nv / --rocm)")
    backend.add_argument("--test-only", action="store_true",
                         help="test the config's packages already in build_artifacts/ instead of "
                              "building (e.g. with --gpu-tests on a GPU machine, after a CPU "
                              "machine built them); no done-marker")
    backend.add_argument("--min-free-gb", type=_gigabytes, metavar="N",
                         help="free disk required before building (default: the config's "
                              "estimate, shown by --list)")
    backend.add_argument("--upload", action="store_true",
                         help="upload the packages; only then are BINSTAR_TOKEN / "
                              "ANACONDA_API_TOKEN passed into the build")

    cluster = parser.add_argument_group(
        "cluster (Slurm)",
        "With --scheduler slurm the selected configs become one job array (one task per\n"
        "config, the same build a local batch runs; configs with a done-marker are not\n"
        "submitted) and a final job that indexes build_artifacts/ once and writes the summary.\n"
        "build_artifacts/ must be on a filesystem every node mounts. Tasks build with --native\n"
        "unless --engine says otherwise (e.g. apptainer). docs/more-machines.md has examples.")
    cluster.add_argument("--scheduler", choices=("slurm",),
                         help="submit the batch to this scheduler instead of building here")
    cluster.add_argument("--partition", help="the tasks' partition (sbatch --partition)")
    cluster.add_argument("--account", help="the account charged (sbatch --account)")
    cluster.add_argument("--time", metavar="LIMIT",
                         help="each task's time limit: MINUTES, HH:MM:SS or DAYS-HH[:MM[:SS]]")
    cluster.add_argument("--cpus-per-task", type=int, metavar="N",
                         help="cores per task; the build's CPU_COUNT follows it")
    cluster.add_argument("--mem", metavar="SIZE",
                         help="memory per task, e.g. 64G (PyTorch needs several GB per compile job)")
    cluster.add_argument("--gpus", metavar="N|TYPE:N",
                         help="GPUs per task (for --gpu-tests), e.g. 1 or a100:1")
    cluster.add_argument("--sbatch-arg", action="append", metavar="ARG",
                         help="more sbatch options for the tasks, e.g. '--qos=long' or "
                              "'--constraint=zen3' (repeatable)")
    cluster.add_argument("--wait", action="store_true",
                         help="follow the tasks, then print the summary and exit as a local "
                              "batch would; Ctrl-C cancels the array")
    cluster.add_argument("--array-task", metavar="JOBDIR", type=Path, help=argparse.SUPPRESS)

    dev = parser.add_argument_group("development builds")
    dev.add_argument("--python", action="append", metavar="X.Y",
                     help="build only these Pythons of a megabuild config (repeat or comma-"
                          "separate); a dev build")
    dev.add_argument("--cuda-arch", metavar="LIST",
                     help="CUDA architectures instead of the full list, e.g. 9.0 or '8.0;9.0'; "
                          "a dev build")
    dev.add_argument("--rocm-arch", metavar="LIST",
                     help="ROCm gfx targets instead of the full list, e.g. gfx90a; a dev build")
    dev.add_argument("--dev-tag", metavar="TAG",
                     help="mark the build as a dev build with this tag (build strings get "
                          "dev<TAG>_); default: derived from the flags above")
    dev.add_argument("--jobs", type=int, metavar="N",
                     help="parallel compile jobs (FEEDSTOCK_MAX_JOBS); each PyTorch job needs "
                          "several GB of RAM")
    dev.add_argument("--heavy-jobs", type=int, metavar="N",
                     help="parallel compiles of the heaviest targets (FlashAttention, FBGEMM "
                          "GenAI: their own Ninja pool, FEEDSTOCK_HEAVY_JOBS); default: from "
                          "available memory at 8 GB each")
    dev.add_argument("--compile-cache", metavar="URL|DIR",
                     help="shared compile cache (ccache): redis://host:port, http://host/path or "
                          "a folder (mounted into the build); its password only from "
                          "FEEDSTOCK_COMPILE_CACHE_PASSWORD, passed by name")
    dev.add_argument("--compile-cache-read-only", action="store_true",
                     help="use the compile cache's hits but store nothing (e.g. pull requests)")
    dev.add_argument("--ccache", metavar="DIR",
                     help="older spelling of --compile-cache DIR")
    own = parser.add_argument_group(
        "your own PyTorch (docs/building-locally.md, \"Building your own PyTorch\")")
    own.add_argument("--develop", metavar="PATH",
                     help="build your PyTorch checkout at PATH (2.14+, scikit-build-core) with CONFIG's "
                          "environment (its pytorch output's build and host requirements, made once "
                          "under build_artifacts/develop/<config>-<python>/) and the driver's settings "
                          "for CONFIG; run it again after an edit: only what the edit touched "
                          "recompiles, torch is installed into that environment. The checkout is "
                          "not modified; one --python (default: the config's newest)")
    own.add_argument("--shell", action="store_true",
                     help="with --develop: open an interactive shell in that environment (in the "
                          "container or natively), activated, with the variables the build uses")
    dev.add_argument("--debug", action="store_true",
                     help="set up the build environment of one config and open a shell in it "
                          "(conda debug)")
    dev.add_argument("--output-id", metavar="ID",
                     help="with --debug: the output to debug, e.g. 'pytorch-*-py312*'")
    return parser


def _gigabytes(text: str) -> float:
    """--min-free-gb: a number of GB, 0 or more (nan and inf would disable the check)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 <= value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of GB (0 or more)")
    return value


def main(feedstock_root: Path, argv: list[str] | None = None) -> int:
    # first: SIGTERM (a scheduler, a CI timeout, a kill) and SIGHUP (a closed terminal, a lost
    # SSH session) are Ctrl-C from here on: the build stops, one line, 130 (129 for a hangup)
    hangups: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        if signum == signal.SIGHUP:
            hangups.append(signum)
        raise_interrupt(signum, frame)

    previous = take_interrupts(interrupt)
    try:
        status = _main_interruptible(feedstock_root, argv)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return EXIT_HANGUP if hangups and status == EXIT_INTERRUPTED else status


def _main_interruptible(feedstock_root: Path, argv: list[str] | None) -> int:
    # for the lock note: a waiting run shows whose run it waits for
    command_line = "build-locally.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        return _main(feedstock_root.resolve(), args, command_line)
    except LocalBuildError as exc:
        sys.stdout.flush()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        try:
            hangup = " (SIGHUP)" if interrupt_name(exc) == "SIGHUP" else ""
            print(f"\nbuild-locally: interrupted{hangup}", file=sys.stderr, flush=True)
        except OSError:  # a closed terminal (EIO): the logs say it; the exit must not fail too
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(root: Path, args: argparse.Namespace, command_line: str) -> int:
    environ = dict(os.environ)
    names = config_names(root)
    if args.list:
        return _print_list(root, names, args.filter)
    _refuse_contradictions(args)
    slurm = _slurm_options(args)
    interactive = sys.stdin.isatty()
    cache: dict[str, CiConfig] = {}

    def config(name: str) -> CiConfig:
        if name not in cache:
            cache[name] = load_config(root, name)
        return cache[name]

    chosen = select(names, args.configs, args.all, args.filter, interactive,
                    ask=lambda candidates: menu(candidates, lambda n: config(n).description(),
                                                sys.stdin, sys.stdout))
    if args.debug and len(chosen) != 1:
        raise LocalBuildError(f"--debug works on one config; {len(chosen)} selected", EXIT_USAGE)
    options = _options(root, args, slurm is not None, interactive, environ)
    if options.request.develop is not None:
        from .develop_run import run_develop

        return run_develop(config(chosen[0]), options, args, command_line, environ)
    backends = {config(name).gpu[0] for name in chosen}
    check_arch_options_apply(backends, args.cuda_arch, args.rocm_arch)
    check_gpu_tests_apply(backends, args.gpu_tests)
    plans = [make_plan(config(name), options, environ) for name in chosen]
    _check_plans(plans, options, args, slurm is not None)
    if slurm is not None:
        from .slurm.batch import run_slurm

        return run_slurm(plans, options, args, slurm, environ, args.dry_run, args.wait)
    from .batch import BatchOptions

    batch = BatchOptions(force=args.force, keep_going=args.keep_going, prune=args.prune,
                         zip_logs=args.zip_logs)
    if args.dry_run:
        from .dryrun import print_plans

        print_plans(plans, options, batch, args.min_free_gb, print)
        if args.downstream:
            from .downstream import command

            print("after the batch: " + " ".join(command(root, options.artifacts, options.request.channels, environ)))
        return 0
    return _run_here(plans, options, batch, args, command_line, environ)


# flags that contradict each other, refused before anything is read: (when, the line)
CONTRADICTIONS = (
    (lambda a: a.test_only and (a.debug or a.upload),
     "--test-only tests packages already built; it does not combine with --debug or --upload"),
    (lambda a: a.tool == "rattler-build" and (a.debug or a.upload),
     "--tool rattler-build builds and tests only; --debug and --upload use conda-build (drop --tool)"),
    (lambda a: a.skip_tests and a.test_only, "--skip-tests and --test-only contradict each other; give one"),
    (lambda a: a.output_id and not a.debug, "--output-id works with --debug only"),
    (lambda a: a.source_tarball is not None and (a.debug or a.test_only),
     "--source-tarball feeds a build, which --debug (conda debug takes no source cache) and "
     "--test-only (no source needed) do not run; drop one"),
    (lambda a: a.native and a.engine,
     "--engine {engine} and --native exclude each other: --native builds on this machine without a "
     "container engine; drop one"),
)


def _refuse_contradictions(args: argparse.Namespace) -> None:
    from .develop import check_flags

    check_flags(args)
    for applies, line in CONTRADICTIONS:
        if applies(args):
            raise LocalBuildError(line.format(engine=args.engine), EXIT_USAGE)


def _options(root: Path, args: argparse.Namespace, slurm: bool, interactive: bool,
             environ: dict[str, str]) -> Options:
    """The run's Options: the build request resolved from the command line and the environment
    (a Slurm task: the one its submitter resolved), and this machine's own values."""
    request = request_from_arguments(args, environ, slurm)
    if args.array_task is not None:  # a Slurm task builds with the request the submitter resolved
        request = _task_request(args.array_task)
    if request.upload and not any(environ.get(k) for k in UPLOAD_CREDENTIALS):
        raise LocalBuildError("--upload needs BINSTAR_TOKEN or ANACONDA_API_TOKEN in the "
                              "environment", EXIT_USAGE)
    return Options(
        feedstock_root=root, request=request,
        index="skip" if args.array_task else "after-build",
        task_output=_task_output(root, args.array_task), debug=args.debug,
        cpu_count=default_cpu_count(environ), ci=environ.get("CI", ""),
        extra_run_args=tuple(engines.extra_run_arguments(environ)), stdin_is_tty=interactive,
        stamp=f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")  # unique container names


def _check_plans(plans: list, options: Options, args: argparse.Namespace, slurm: bool) -> None:
    """What the plans themselves make impossible, refused in a dry run as in the run."""
    if all(plan.skip_reason for plan in plans):
        reasons = "; ".join(f"{plan.name}: {plan.skip_reason}" for plan in plans[:3])
        raise LocalBuildError(f"nothing this machine can build ({reasons})", EXIT_USAGE)
    if options.request.source_tarball is not None:  # before anything is written, dry runs too
        check_tarball(options.request.source_tarball, list(dict.fromkeys(p.source for p in plans if p.source)))
    if not slurm and args.array_task is None:
        # the same line in a dry run as in the run (a Slurm job's nodes count their own cores)
        from .preflight import check_cpu_count

        check_cpu_count(options.cpu_count)


def _run_here(plans: list, options: Options, batch, args: argparse.Namespace, command_line: str,
              environ: dict[str, str]) -> int:
    """The batch on this machine: the checks, then the builds under build_artifacts/'s lock."""
    from . import preflight
    from .batch import run_batch, will_run
    from .left_containers import check_plans as check_left_containers
    from .lock import artifacts_lock

    root = options.feedstock_root
    # before the lock: a machine that cannot build creates nothing, not even build_artifacts/
    runnable = [plan for plan in plans if will_run(plan, args.force)]
    preflight.run_all(runnable, options.request.engine, root, options.cpu_count, args.min_free_gb,
                      options.request.tool, environ)
    console = Console()
    if args.array_task is not None:
        return _array_task(plans, options, args, console, environ)
    try:
        with artifacts_lock(options.artifacts, command_line, not args.no_wait, console.say):
            check_left_containers(runnable, options.request.engine, options.artifacts,
                                  not args.no_wait, console.say)
            # a run (or left container) we waited for may have built some of these configs
            # and used the disk
            runnable = [plan for plan in plans if will_run(plan, args.force)]
            preflight.check_disk(options.artifacts, runnable, args.min_free_gb)
            status = run_batch(plans, options, batch, console, environ)
            if args.downstream:  # inside the lock: it indexes build_artifacts/
                from .downstream import run_downstream

                downstream = run_downstream(root, options.artifacts, options.request.channels, environ, console.say)
                status = status or downstream
            return status
    finally:
        hand_back(options.artifacts, host_user_id(environ))


def _slurm_options(args: argparse.Namespace):
    """The SlurmOptions of --scheduler slurm (checked now), or None without it."""
    from .slurm.options import parse_slurm_options

    given = [flag for flag, value in (
        ("--partition", args.partition), ("--account", args.account), ("--time", args.time),
        ("--cpus-per-task", args.cpus_per_task), ("--mem", args.mem), ("--gpus", args.gpus),
        ("--sbatch-arg", args.sbatch_arg), ("--wait", args.wait)) if value]
    if args.scheduler is None:
        if given:
            raise LocalBuildError(f"{given[0]} works with --scheduler slurm only", EXIT_USAGE)
        return None
    if args.debug or args.array_task is not None:
        raise LocalBuildError("--debug opens a shell here; it does not combine with "
                              "--scheduler slurm", EXIT_USAGE)
    return parse_slurm_options(args.partition, args.account, args.time, args.cpus_per_task,
                               args.mem, args.gpus, args.sbatch_arg)


def _task_output(root: Path, job_dir: Path | None) -> str | None:
    """Where a Slurm task builds: JOBDIR/work/, relative to build_artifacts/ (the same path
    inside a container)."""
    if job_dir is None:
        return None
    try:
        return str((job_dir.resolve() / "work").relative_to(root / "build_artifacts"))
    except ValueError:
        raise LocalBuildError(f"--array-task {job_dir}: not inside build_artifacts/", EXIT_USAGE) from None


def _task_request(job_dir: Path) -> BuildRequest:
    """The build request of the submitting run (job.json's build_request)."""
    from .slurm.summary import JOB_FILE, read_json

    job = read_json(job_dir / JOB_FILE) or {}
    try:
        return BuildRequest.from_json(job["build_request"])
    except (KeyError, TypeError, ValueError):
        raise LocalBuildError(f"--array-task {job_dir}: its {JOB_FILE} has no readable build_request "
                              "(it is written by build-locally.py --scheduler slurm); submit again",
                              EXIT_USAGE) from None


def _array_task(plans: list, options, args: argparse.Namespace, console: Console,
                environ: dict[str, str]) -> int:
    """One task of a Slurm array: the config's build as a local batch runs it, without the
    build_artifacts/ lock (it would serialise the array; the tasks build different configs
    and the final job indexes once), and its summary row left for the final job."""
    from .batch import BatchOptions, Row, run_batch
    from .slurm.summary import write_result

    rows: list[Row] = []
    try:
        return run_batch(plans, options, BatchOptions(force=True), console, environ, rows)
    finally:
        for row in rows:
            write_result(args.array_task, row)


def _print_list(root: Path, names: list[str], filters: list[str]) -> int:
    shown = apply_filters(names, compile_filters(filters))
    if not shown:
        raise LocalBuildError(f"no config matches --filter {' --filter '.join(filters)}",
                              EXIT_USAGE)
    artifacts = root / "build_artifacts"
    width = max(len(name) for name in shown)
    for name in shown:
        config = load_config(root, name)
        done = " [built]" if (artifacts / f"{MARKER_PREFIX}{name}").exists() else ""
        print(f"{name:<{width}}  {config.description()}{done}")
    return 0
