#!/usr/bin/env python3
"""`build-locally.py CONFIG --develop PATH`, where the build runs (in the config's container or
natively): the develop environment, then the driver's develop step on the checkout, or a shell.

Run by build_steps.sh with the Python that has py-rattler-build and py-rattler
(RATTLER_BUILD_PYTHON). Input, all from the environment build-locally.py sets:

  DEVELOP_SOURCE   the checkout (the same path as on the host)
  DEVELOP_DIR      build_artifacts/develop/<config>-<python>/ (the same path as on the host):
                   env/ (the environment), build/ (the build folder), stage/ (the driver's
                   scikit-build-core), develop.json (what the environment was made from)
  DEVELOP_PYTHON   the Python, as the config names it (3.12, 3.13t)
  DEVELOP_SHELL=1  open a shell in the environment instead of building
  CONFIG_FILE, RECIPE_ROOT, CHANNEL_SOURCES, CONFIG_CUDA_VERSION, CPU_COUNT and the overrides
                   (FEEDSTOCK_*), as for a package build

The environment holds the build and host requirements of the config's `pytorch` output, as
rattler-build renders them for that config and Python (the variant's pins applied, the
feedstock's own packages left out: the checkout is what builds them). It is made again only when
those requirements, the channels (a local channel's repodata.json) or the location changed, and
the first line says which.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

FEEDSTOCK_ROOT = Path(os.environ.get("FEEDSTOCK_ROOT") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(FEEDSTOCK_ROOT))   # common/: the atomic writer and the driver's loader

from common.atomic_files import write_atomically  # noqa: E402
from common.clean_exit import run_command  # noqa: E402
from common.driver import driver_module  # noqa: E402

OWN_PACKAGES = frozenset({"libtorch", "libtorch-split", "libtorch-cuda-linalg", "pytorch"})
STAMP = "develop.json"
# what the driver reads besides the variant (the variant's keys are its own, context.VARIANT_KEYS):
# the flags' overrides (overrides.FLAG_VARIABLES; never a secret: the rebuild script is a file)
# and where ROCm is
MACHINE_INPUTS = ("CPU_COUNT", "ROCM_PATH", "HIP_PLATFORM")


class DevelopError(Exception):
    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def say(message: str) -> None:
    print(f"develop: {message}", flush=True)


def _await(value):
    return asyncio.run(value) if asyncio.iscoroutine(value) else value


# -- what the environment is made of -------------------------------------------------------------

def _pinned(spec: str, variant: dict[str, str]) -> str:
    """A bare name the variant pins gets the variant's value, as rattler-build applies it."""
    if " " in spec or spec not in variant:
        return spec
    value = variant[spec]
    if value and value[0].isdigit() and not any(c in value for c in "*<>=!, "):
        value += ".*"   # a bare version pins the series (numpy: 2 -> 2.*)
    return f"{spec} {value}"


def rendered_requirements(recipe: Path, config_file: Path) -> tuple[list[str], dict[str, str]]:
    """(the pytorch output's build + host specs, its variant) for the config's one Python."""
    from rattler_build import Stage0Recipe, VariantConfig
    from rattler_build.render import RenderConfig
    from rattler_build.tool_config import PlatformConfig

    config = VariantConfig.from_file(str(config_file))
    platform = str((config.get("target_platform") or ["linux-64"])[0])
    try:
        variants = Stage0Recipe.from_file(str(recipe)).render(
            config, RenderConfig(platform=PlatformConfig(target_platform=platform)))
    except Exception as err:  # rattler-build's own error types
        raise DevelopError(f"{recipe} does not render for this config: {' '.join(str(err).split())[:300]}")
    for rendered in variants:
        data = rendered.recipe.to_dict()
        if data.get("package", {}).get("name") != "pytorch":
            continue
        variant = {str(k): str(v) for k, v in rendered.variant.items()}
        specs: list[str] = []
        for section in ("build", "host"):
            for item in data.get("requirements", {}).get(section) or []:
                if not isinstance(item, str) or item.split()[0] in OWN_PACKAGES:
                    continue   # pin_subpackage of our own outputs: the checkout builds them
                spec = _pinned(item, variant)
                if spec not in specs:
                    specs.append(spec)
        return specs, variant
    raise DevelopError(f"{recipe} renders no pytorch output for this config; is it the feedstock's recipe?")


def channel_digests(channels: list[str]) -> dict[str, str]:
    """channel -> what identifies its content: a local folder's repodata.json files hashed (it
    may be mounted read-only: it is read, never indexed here), a named or remote channel by its
    name alone."""
    digests = {}
    for channel in channels:
        folder = Path(channel)
        if folder.is_dir():
            sha = hashlib.sha256()
            for repodata in sorted(folder.glob("*/repodata.json")):
                sha.update(repodata.parent.name.encode() + b"\0" + repodata.read_bytes())
            digests[channel] = sha.hexdigest()
        else:
            digests[channel] = "by name"
    return digests


def stale_reasons(old: dict, new: dict) -> list[str]:
    """Why an environment made from `old` does not serve `new` (empty: it does)."""
    if not old:
        return ["no environment yet"]
    if not old.get("complete"):
        return ["the last environment build did not finish"]
    reasons = []
    added = [s for s in new["specs"] if s not in old.get("specs", [])]
    removed = [s for s in old.get("specs", []) if s not in new["specs"]]
    if added or removed:
        change = ", ".join([f"+{s}" for s in added] + [f"-{s}" for s in removed])
        reasons.append(f"the recipe's requirements changed ({change})")
    for channel, digest in new["channels"].items():
        if channel not in old.get("channels", {}):
            reasons.append(f"channel {channel} is new")
        elif old["channels"][channel] != digest:
            reasons.append(f"channel {channel} changed")
    reasons += [f"channel {c} is gone" for c in old.get("channels", {}) if c not in new["channels"]]
    if old.get("location") != new["location"]:
        reasons.append(f"it was made {old.get('location')}, this build runs {new['location']}")
    return reasons


def make_environment(prefix: Path, specs: list[str], channels: list[str], platform: str,
                     cuda: str | None, cache: Path) -> int:
    import rattler

    overrides = rattler.VirtualPackageOverrides()
    if cuda is not None:
        overrides.cuda = rattler.Override.string(cuda)
    sources = [rattler.Channel(Path(c).resolve().as_uri() if Path(c).is_dir() else c) for c in channels]
    try:
        records = _await(rattler.solve(sources=sources, specs=specs, platforms=[platform, "noarch"],
                                       virtual_packages=rattler.VirtualPackage.detect(overrides)))
    except Exception as err:  # rattler's SolverError spans lines
        raise DevelopError(f"the environment cannot be solved from {', '.join(channels)}: "
                           f"{' '.join(str(err).split())[:400]}")
    if prefix.exists():
        shutil.rmtree(prefix)
    _await(rattler.install(records, target_prefix=prefix, cache_dir=cache, show_progress=False))
    return len(records)


# -- the scripts the build and the shell run -------------------------------------------------------

def activation(prefix: Path) -> str:
    """What `conda activate` does for a build: the prefix first on PATH, its activate.d scripts."""
    return "\n".join([
        f"export CONDA_PREFIX={shlex.quote(str(prefix))} PREFIX={shlex.quote(str(prefix))} "
        f"BUILD_PREFIX={shlex.quote(str(prefix))}",
        f'export PATH={shlex.quote(str(prefix / "bin"))}:"$PATH"',
        f'for script in {shlex.quote(str(prefix / "etc/conda/activate.d"))}/*.sh; do',
        '    if [ -f "$script" ]; then . "$script"; fi',
        "done",
    ])


def driver_script(folder: Path, prefix: Path, source: Path, recipe: Path, variant: dict[str, str]) -> str:
    """bash: activate, then `python -m megabuild` with the develop step's inputs."""
    inputs = {"SRC_DIR": str(source), "PYTHON": str(prefix / "bin" / "python"),
              "PKG_NAME": driver_module(FEEDSTOCK_ROOT, "steps").DEVELOP_STEP,
              "MEGABUILD_BUILD_DIR": str(folder / "build"), "MEGABUILD_STAGE_DIR": str(folder / "stage"),
              "MEGABUILD_WORK_DIR": str(folder / "work"),
              "PYTHONPYCACHEPREFIX": str(folder / "work" / "pycache")}
    inputs.update({k: variant[k] for k in driver_module(FEEDSTOCK_ROOT, "context").VARIANT_KEYS
                   if variant.get(k) not in (None, "")})
    passed = (*driver_module(FEEDSTOCK_ROOT, "overrides").FLAG_VARIABLES, *MACHINE_INPUTS)
    inputs.update({k: os.environ[k] for k in passed if os.environ.get(k)})
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(inputs.items()))
    return "\n".join(["#!/usr/bin/env bash", "# the develop build (build-locally.py --develop): run it again after an edit",
                      "set -euo pipefail", activation(prefix), f"export {exports}",
                      f"cd {shlex.quote(str(source))}",
                      f'PYTHONPATH={shlex.quote(str(recipe))} exec "$PYTHON" -m megabuild']) + "\n"


def shell_rc(folder: Path, prefix: Path, source: Path) -> str:
    return "\n".join([
        "# --shell: the develop environment with the variables the build used",
        '[ -f ~/.bashrc ] && . ~/.bashrc',
        activation(prefix),
        f". {shlex.quote(str(folder / 'work' / 'build-env.sh'))}",
        f"cd {shlex.quote(str(source))}",
        f"PS1='(develop {shlex.quote(folder.name)}) \\w\\$ '",
        f"echo 'develop shell: rebuild after an edit with: bash {folder / 'rebuild'}'",
    ]) + "\n"


def write_file(path: Path, text: str, mode: int = 0o644) -> None:
    write_atomically(path, text)
    path.chmod(mode)


# -- the run ----------------------------------------------------------------------------------------

def prepare(folder: Path, source: Path, python: str, location: str, recipe_root: Path) -> tuple[Path, dict]:
    """The environment, current; returns (prefix, the variant). build-locally.py has refused a
    folder of another checkout, config or Python before it started this."""
    specs, variant = rendered_requirements(recipe_root / "recipe.yaml", Path(os.environ["CONFIG_FILE"]))
    channels = [c for c in os.environ.get("CHANNEL_SOURCES", "").split(",") if c]
    new = {"config": os.environ.get("CONFIG", ""), "python": python, "source": str(source),
           "specs": specs, "channels": channel_digests(channels), "location": location}
    stamp = folder / STAMP
    old = json.loads(stamp.read_text()) if stamp.is_file() else {}
    prefix = folder / "env"
    reasons = stale_reasons(old, new)
    if reasons:
        say(f"environment: making {prefix} ({'; '.join(reasons)})")
        write_file(stamp, json.dumps({**new, "complete": False}, indent=1) + "\n")
        count = make_environment(prefix, specs, channels, variant.get("target_platform", "linux-64"),
                                 os.environ.get("CONFIG_CUDA_VERSION"), folder.parent / "pkgs")
        write_file(stamp, json.dumps({**new, "complete": True}, indent=1) + "\n")
        say(f"environment: {count} packages installed")
    else:
        say(f"environment: {prefix} is current ({len(specs)} requirements, recipe and channels unchanged)")
    return prefix, variant


def main() -> int:
    source = Path(os.environ["DEVELOP_SOURCE"])
    folder = Path(os.environ["DEVELOP_DIR"])
    location = "natively" if os.environ.get("LOCALBUILD_NATIVE") == "1" else "in a container"
    recipe = Path(os.environ["RECIPE_ROOT"])
    try:
        folder.mkdir(parents=True, exist_ok=True)
        prefix, variant = prepare(folder, source, os.environ["DEVELOP_PYTHON"], location, recipe)
    except DevelopError as err:
        print(f"develop: error: {err}", file=sys.stderr, flush=True)
        return err.code
    except ImportError as err:
        print(f"develop: error: {err}; --develop needs py-rattler-build and py-rattler "
              "(requirements-dev.txt) in RATTLER_BUILD_PYTHON", file=sys.stderr, flush=True)
        return 3
    except OSError as err:   # a folder that cannot be written, a disk that is full
        print(f"develop: error: {err.filename or folder}: {err.strerror or err}", file=sys.stderr, flush=True)
        return 1
    rebuild = folder / "rebuild"
    write_file(rebuild, driver_script(folder, prefix, source, recipe, variant), 0o755)
    if os.environ.get("DEVELOP_SHELL") == "1":
        # the driver writes the variables it builds with, and stops there
        only = driver_module(FEEDSTOCK_ROOT, "develop").VARIABLES_ONLY
        if subprocess.run(["bash", str(rebuild)], env={**os.environ, only: "1"}).returncode != 0:
            return 1
        write_file(folder / "shellrc", shell_rc(folder, prefix, source))
        return subprocess.run(["bash", "--rcfile", str(folder / "shellrc"), "-i"]).returncode
    code = subprocess.run(["bash", str(rebuild)]).returncode
    if code == 0 and os.environ.get("DONE_MARKER"):
        (folder / os.environ["DONE_MARKER"]).touch()
    return code


if __name__ == "__main__":
    # py-rattler's threads must not outlive the interpreter's finalization (common/clean_exit.py)
    run_command(main)
