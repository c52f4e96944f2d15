"""build-locally.py CONFIG --develop PATH: a developer's own PyTorch checkout, built with the
config's environment and the driver's settings, again and again (docs/building-locally.md,
"Building your own PyTorch").

This module is the host's half: it checks the checkout and the flags (one line each, before
anything is written), picks the Python, names the develop folder, and describes the develop
build for the dry run. Where the build runs, localbuild/in_container/develop.py makes the
environment and runs the driver's develop step (recipe/megabuild/develop.py).

The develop folder, `build_artifacts/develop/<config>-<python>/`, is seen at the same path by
the host and by a container (mounted there), as is the checkout: the paths CMake records, the
environment's prefix and the ones in error messages are the host's.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from common.input_files import read_regular
from common.nesting import depth_refusal

from .configs import CiConfig
from .errors import EXIT_USAGE, LocalBuildError

DEVELOP_FOLDER = "develop"
STAMP = "develop.json"   # written by localbuild/in_container/develop.py
DONE_MARKER = "develop-done"
LOG_NAME = "develop-log.txt"
_BACKEND = re.compile(r"""^\s*build-backend\s*=\s*["']scikit_build_core[.\w]*["']""", re.MULTILINE)
# the flags that make no sense with --develop: (flag, attribute, why)
NOT_WITH_DEVELOP = (
    ("--all", "all", "it builds one config"), ("--filter", "filter", "it builds one config"),
    ("--test-only", "test_only", "it builds no packages"), ("--upload", "upload", "it builds no packages"),
    ("--debug", "debug", "--shell opens the develop environment"),
    ("--source-tarball", "source_tarball", "the checkout is the source"),
    ("--downstream", "downstream", "it builds no packages"), ("--scheduler", "scheduler", "it runs here"),
    ("--dev-tag", "dev_tag", "it builds no packages"),
)


def check_flags(args) -> None:
    """--develop's contradictions, refused before anything is read."""
    if args.shell and args.develop is None:
        raise LocalBuildError("--shell opens the develop environment of --develop PATH; give "
                              "--develop too", EXIT_USAGE)
    if args.develop is None:
        return
    for flag, attribute, why in NOT_WITH_DEVELOP:
        if getattr(args, attribute, None):
            raise LocalBuildError(f"--develop does not combine with {flag}: {why}", EXIT_USAGE)
    if args.tool == "conda-build":
        raise LocalBuildError("--develop makes its environment with rattler (py-rattler-build); "
                              "drop --tool conda-build", EXIT_USAGE)
    if len(args.configs) != 1:
        raise LocalBuildError(f"--develop builds one config; {len(args.configs)} given "
                              "(`build-locally.py --list` shows them)", EXIT_USAGE)


def _front_end(tree: Path, shown: str) -> str | None:
    """"scikit-build-core", "setup.py" or None, from the checkout's pyproject.toml (which must
    be UTF-8 TOML) or setup.py."""
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = read_regular(pyproject).decode("utf-8")
        except OSError as err:
            raise LocalBuildError(f"--develop {shown}: cannot read pyproject.toml ({err.strerror or err})",
                                  EXIT_USAGE) from None
        except UnicodeDecodeError:
            raise LocalBuildError(f"--develop {shown}: pyproject.toml is not UTF-8 text; is this your "
                                  "PyTorch checkout?", EXIT_USAGE) from None
        refusal = depth_refusal(data, f"--develop {shown}: pyproject.toml")
        if refusal:   # tomllib recurses per level: 600 `[`s were a RecursionError
            raise LocalBuildError(f"{refusal}; is this your PyTorch checkout?", EXIT_USAGE)
        try:
            import tomllib   # Python 3.11+; older Pythons look for the line itself
        except ImportError:
            backend = _BACKEND.search(data) and "scikit_build_core"
        else:
            try:
                backend = str(tomllib.loads(data).get("build-system", {}).get("build-backend", ""))
            except (tomllib.TOMLDecodeError, AttributeError) as err:
                raise LocalBuildError(f"--develop {shown}: pyproject.toml does not parse ({err}); is this "
                                      "your PyTorch checkout?", EXIT_USAGE) from None
        if backend and backend.startswith("scikit_build_core"):
            return "scikit-build-core"
    if (tree / "setup.py").is_file():
        return "setup.py"
    return None


def check_tree(value: str) -> Path:
    """The checkout at `value`, resolved; one line (exit 2) when it is not a PyTorch tree this
    can build."""
    tree = Path(value).expanduser()
    if not tree.exists():
        raise LocalBuildError(f"--develop {value}: no such folder; give your PyTorch checkout", EXIT_USAGE)
    if not tree.is_dir():
        raise LocalBuildError(f"--develop {value}: not a folder; give your PyTorch checkout "
                              "(the folder with pyproject.toml)", EXIT_USAGE)
    tree = tree.resolve()
    front_end = _front_end(tree, value)
    if front_end is None or not (tree / "torch").is_dir() or not (tree / "CMakeLists.txt").is_file():
        raise LocalBuildError(f"--develop {value}: not a PyTorch source tree (it needs CMakeLists.txt, "
                              "torch/ and a pyproject.toml whose build-backend is scikit-build-core); "
                              "give the top folder of your checkout", EXIT_USAGE)
    if front_end == "setup.py":
        raise LocalBuildError(f"--develop {value}: a setup.py tree (PyTorch 2.13 or older), whose build "
                              "folder is the checkout's own build/; --develop builds 2.14+ checkouts "
                              "(scikit-build-core) with the build folder outside them: check out "
                              "v2.14.0 or later", EXIT_USAGE)
    return tree


def tree_version(tree: Path) -> str | None:
    """The checkout's version.txt (PyTorch's own), if it has one."""
    try:
        text = (tree / "version.txt").read_text(encoding="utf-8", errors="replace")[:100].strip()
    except OSError:
        return None
    return text.splitlines()[0] if text else None


def version_note(tree: Path, recipe_version: str) -> str | None:
    """A line when the checkout is another release than the recipe's: built all the same, since
    a developer's branch is usually ahead of the packaged release (a newer tree may need a
    package the recipe does not list yet: the build then says which)."""
    version = tree_version(tree)
    if version is None:
        return f"{tree} has no version.txt; building it with the environment of the recipe's {recipe_version}"
    if version.split(".")[:2] != recipe_version.split(".")[:2]:
        return (f"{tree} is PyTorch {version}, the recipe builds {recipe_version}: building it with "
                f"the recipe's environment (a package the newer tree needs and the recipe lacks "
                "shows up as a configure error)")
    return None


def choose_python(config: CiConfig, asked: tuple[str, ...]) -> tuple[str, str]:
    """(the one Python, how it was chosen); --python must name one the config builds."""
    offered = [entry.label for entry in config.pythons]
    if len(asked) > 1:
        raise LocalBuildError(f"--develop builds for one Python; {len(asked)} given ({', '.join(asked)})",
                              EXIT_USAGE)
    if asked:
        if asked[0] not in offered:
            raise LocalBuildError(f"--python {asked[0]}: {config.name} builds {', '.join(offered)}; "
                                  "give one of them", EXIT_USAGE)
        return asked[0], "--python"
    regular = [p for p in offered if not p.endswith("t")] or offered
    return regular[-1], "the config's newest; --python X.Y chooses another"


def develop_folder(artifacts: Path, config: str, python: str) -> Path:
    return artifacts / DEVELOP_FOLDER / f"{config}-{python}"


def check_folder(folder: Path, tree: Path, config: str, python: str) -> None:
    """A develop folder holds one checkout's build for one config and Python: another's is
    refused (one line)."""
    stamp = folder / STAMP
    if not stamp.is_file():
        return
    try:
        data = json.loads(stamp.read_text(encoding="utf-8"))
        recorded, made_for = data.get("source"), (data.get("config"), data.get("python"))
    except (OSError, ValueError, AttributeError):
        raise LocalBuildError(f"{stamp} is unreadable; remove {folder} to start this develop build "
                              "over", EXIT_USAGE) from None
    if all(made_for) and made_for != (config, python):
        raise LocalBuildError(f"{folder} holds a build for {made_for[0]} and Python {made_for[1]}, not "
                              f"{config} and {python}; remove {folder} (a copied or renamed develop "
                              "folder cannot be reused)", EXIT_USAGE)
    if recorded and recorded != str(tree):
        raise LocalBuildError(f"{folder} holds the build of {recorded}, not {tree}; remove {folder} "
                              f"to build {tree} here, or develop {recorded}", EXIT_USAGE)


def describe(folder: Path, tree: Path, python: str, how: str, note: str | None) -> list[str]:
    """The dry run's develop lines: what is there, and what the run would do."""
    lines = [f"develop:      {tree}", f"  python:     {python} ({how})", f"  folder:     {folder}"]
    if note:
        lines.append(f"  note:       {note}")
    prefix = folder / "env"
    stamp = _stamp(folder)
    if stamp.get("complete") and prefix.is_dir():
        lines.append(f"  environment: {prefix}, made {stamp.get('location', '?')} from "
                     f"{len(stamp.get('specs', []))} requirements (made again when the recipe's "
                     "requirements or the channels change)")
        lines += _toolchain_lines(folder, prefix)
    else:
        lines.append(f"  environment: {prefix}: not made yet; the run solves the pytorch output's "
                     "build and host requirements from the channels and installs them there")
    build = folder / "build"
    cache = build / "CMakeCache.txt"
    lines.append(f"  build folder: {build}" + ("" if cache.is_file() else " (none yet: the first run configures it)"))
    lines.append(f"  at run time: LD_LIBRARY_PATH={prefix / 'lib'} (the environment's, as linked)")
    return lines


def _stamp(folder: Path) -> dict:
    try:
        data = json.loads((folder / STAMP).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


# the compiler the environment's activation names, its include search order, and CMake's version
_QUERY = r"""
for script in "$CONDA_PREFIX"/etc/conda/activate.d/*.sh; do [ -f "$script" ] && . "$script"; done
[ -f "$DEVELOP_WORK/build-env.sh" ] && . "$DEVELOP_WORK/build-env.sh"
cxx="${CXX:-c++}"
echo "compiler: $(command -v "$cxx" || echo "$cxx")"
$cxx $CXXFLAGS -E -x c++ - -v </dev/null 2>&1 | sed -n '/search starts here:/,/End of search list/p' | grep '^ ' | sed 's/^ */include: /'
echo "cmake: $(cmake --version 2>/dev/null | head -1)"
"""


def _toolchain_lines(folder: Path, prefix: Path) -> list[str]:
    env = {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "CONDA_PREFIX": str(prefix),
           "PREFIX": str(prefix), "BUILD_PREFIX": str(prefix), "DEVELOP_WORK": str(folder / "work")}
    try:
        proc = subprocess.run(["bash", "-c", _QUERY], env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return [f"  compiler:   not queried ({err})"]
    lines, includes = [], []
    for line in proc.stdout.splitlines():
        kind, _, value = line.partition(": ")
        if kind == "include":
            includes.append(value.strip())
        elif kind in ("compiler", "cmake"):
            lines.append(f"  {kind + ':':<11} {value.strip() or 'not found'}")
    if includes:
        lines.insert(1, "  include order: " + " -> ".join(shlex.quote(i) for i in includes))
    return lines

