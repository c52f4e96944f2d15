"""build-locally.py CONFIG --develop PATH [--shell]: one develop build (or shell) of the checkout,
planned like a config's build (localbuild/plan.py) and run under build_artifacts/'s lock."""
from __future__ import annotations

import argparse
import dataclasses

from .configs import CiConfig
from .console import Console
from .develop import check_folder, choose_python, describe, version_note
from .errors import EXIT_USAGE, LocalBuildError
from .gpu_archs import check_arch_options_apply
from .options import Options
from .ownership import hand_back, host_user_id
from .plan import make_plan
from .source_tarball import recipe_version


def run_develop(config: CiConfig, options: Options, args: argparse.Namespace, command_line: str,
                environ: dict[str, str]) -> int:
    request = options.request
    tree = request.develop
    python, how = choose_python(config, request.pythons)
    check_arch_options_apply({config.gpu[0]}, args.cuda_arch, args.rocm_arch)
    options = dataclasses.replace(options, request=dataclasses.replace(request, pythons=(python,)))
    plan = make_plan(config, options, environ)
    if plan.skip_reason:
        raise LocalBuildError(f"{config.name}: {plan.skip_reason}", EXIT_USAGE)
    folder = plan.develop_folder
    check_folder(folder, tree, config.name, python)
    try:
        note = version_note(tree, recipe_version(options.feedstock_root / "recipe" / "recipe.yaml",
                                                 "recipe/recipe.yaml"))
    except LocalBuildError:
        note = None
    if args.dry_run:
        from .dryrun import environment_lines, where_and_how

        print(f"== {plan.name}: {config.description()} (--develop{' --shell' if request.shell else ''})")
        for line in [*where_and_how(plan, options), *describe(folder, tree, python, how, note),
                     *environment_lines(plan)]:
            print(line)
        return 0
    from . import preflight
    from .left_containers import check_plans as check_left_containers
    from .lock import artifacts_lock
    from .runner import BuildInterrupted, run_plan

    preflight.run_all([plan], request.engine, options.feedstock_root, options.cpu_count, args.min_free_gb,
                      request.tool, environ)
    console = Console()
    console.say(f"develop: {tree} for Python {python} ({how})")
    if note:
        console.say(f"develop: note: {note}")
    try:
        with artifacts_lock(options.artifacts, command_line, not args.no_wait, console.say):
            check_left_containers([plan], request.engine, options.artifacts, not args.no_wait,
                                  console.say)
            folder.mkdir(parents=True, exist_ok=True)   # mounted into a container: it must exist
            try:
                outcome = run_plan(plan, options, console, f"develop {config.name}", environ)
            except BuildInterrupted as exc:
                raise exc.interrupt from None
            return 0 if outcome.status == "ok" else 1
    finally:
        hand_back(options.artifacts, host_user_id(environ))
