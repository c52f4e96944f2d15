"""Which `cmake` scikit-build-core will run, found by its own rules (1.x, `program_search` and
`CMake.default_search`), so the driver checks the CMake that builds rather than PATH's:

1. `CMAKE_EXECUTABLE` in the environment: that one and no other;
2. otherwise, in order: the `cmake` module of the interpreter that runs the backend (PyPI's
   cmake package in the host environment: `cmake.CMAKE_BIN_DIR/cmake`), then `cmake` and
   `cmake3` on PATH;
3. the first of those whose version satisfies the project's `[tool.scikit-build] cmake.version`
   (without one: `>=` the `cmake_minimum_required` of CMakeLists.txt, as scikit-build-core's
   default since 0.10 reads it; 3.15 when neither says).

A PyPI cmake in the host environment therefore wins over PATH's whenever the project accepts
its version, even when PATH's is the recipe's pinned build requirement.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import pyproject
from .errors import MegabuildError
from .tool_versions import CMAKE_SPEC, ON_PATH, release_of, require_in_range

FALLBACK_MINIMUM = ">=3.15"  # scikit-build-core's when CMakeLists.txt names no minimum
# the module scikit-build-core imports; '' (the source tree, cwd) is not on the backend's path
_MODULE_QUERY = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"
                 "try:\n    from cmake import CMAKE_BIN_DIR\n"
                 "except ImportError:\n    pass\nelse:\n    print(CMAKE_BIN_DIR)\n")


@dataclass(frozen=True)
class Candidate:
    path: str
    source: str  # "CMAKE_EXECUTABLE", "module" or "PATH"
    release: tuple[int, ...]


def candidates(python: Path, env: Mapping[str, str]) -> list[Candidate]:
    """Every CMake scikit-build-core would consider, best first, with its release."""
    if env.get("CMAKE_EXECUTABLE"):
        path = env["CMAKE_EXECUTABLE"]
        return [Candidate(path, "CMAKE_EXECUTABLE", release_of(path, env))]
    found: list[tuple[str, str]] = []
    module_bin = _module_bin_dir(python, env)
    if module_bin:
        found.append((str(Path(module_bin) / "cmake"), "module"))
    for name in ("cmake", "cmake3"):
        path = shutil.which(name, path=env.get("PATH", ""))
        if path:
            found.append((path, "PATH"))
    # a candidate that cannot say its version is skipped, as scikit-build-core skips it
    out = []
    for path, source in found:
        try:
            out.append(Candidate(path, source, release_of(path, env)))
        except MegabuildError:
            continue
    return out


def _module_bin_dir(python: Path, env: Mapping[str, str]) -> str:
    try:
        proc = subprocess.run([str(python), "-c", _MODULE_QUERY], capture_output=True, text=True,
                              env=dict(env), timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MegabuildError(f"cannot run {python}: {exc}") from None
    return proc.stdout.strip() if proc.returncode == 0 else ""


def project_spec(src_dir: Path) -> str:
    """The CMake versions the project accepts, as scikit-build-core reads them."""
    written = pyproject.cmake_version(src_dir)
    if written and written != "CMakeLists.txt":
        return written
    cmakelists = Path(src_dir) / "CMakeLists.txt"
    text = cmakelists.read_text(errors="replace") if cmakelists.is_file() else ""
    found = re.search(r"^\s*cmake_minimum_required\s*\(\s*VERSION\s+(\d+(?:\.\d+)*)", text,
                      re.MULTILINE | re.IGNORECASE)
    return f">={found.group(1)}" if found else FALLBACK_MINIMUM


def satisfies(release: tuple[int, ...], spec: str) -> bool:
    """Whether a release meets a PEP 440 specifier set of plain release numbers (">=3.27,<5",
    "~=3.30", "==3.31.*", "!=4.0.0"); pre-release tags are not CMake's business here."""
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        match = re.fullmatch(r"(~=|==|!=|<=|>=|<|>)\s*([\d.]+)(\.\*)?", clause)
        if not match:
            raise MegabuildError(f"cannot read the CMake version requirement {spec!r} of "
                                 "[tool.scikit-build] cmake.version; write it as `>=3.27`")
        op, text, star = match.groups()
        wanted = tuple(int(part) for part in text.strip('.').split('.') if part)
        if not _holds(release, op, wanted, star is not None):
            return False
    return True


def _holds(release: tuple[int, ...], op: str, wanted: tuple[int, ...], prefix: bool) -> bool:
    width = max(len(release), len(wanted))
    have, want = (v + (0,) * (width - len(v)) for v in (release, wanted))
    if op in ("==", "!=") and prefix:
        equal = release[:len(wanted)] == wanted
        return equal if op == "==" else not equal
    if op == "~=":
        return have >= want and release[:len(wanted) - 1] == wanted[:-1]
    return {"==": have == want, "!=": have != want, "<=": have <= want, ">=": have >= want,
            "<": have < want, ">": have > want}[op]


def scikit_build_cmake(python: Path, src_dir: Path, env: Mapping[str, str]) -> Candidate:
    """The CMake scikit-build-core will run for this tree; none it accepts is an error."""
    spec = project_spec(src_dir)
    found = candidates(python, env)
    chosen = next((c for c in found if satisfies(c.release, spec)), None)
    if chosen is None:
        if found:  # the usual cause: the first CMake is too old for the recipe as well
            require_in_range(found[0].path, found[0].release, fix_for(found[0], python))
        seen = ", ".join(f"{c.path} ({'.'.join(map(str, c.release))})" for c in found) or "none"
        raise MegabuildError(f"no CMake that {src_dir}'s cmake.version ({spec}) accepts (found: "
                             f"{seen}); add `{CMAKE_SPEC}` to the build requirements")
    return chosen


def fix_for(candidate: Candidate, python: Path) -> str:
    """What to do about an out-of-range CMake, by where scikit-build-core found it."""
    if candidate.source == "CMAKE_EXECUTABLE":
        return "point CMAKE_EXECUTABLE at a CMake in that range, or unset it"
    if candidate.source == "module":
        return (f"it is PyPI's cmake in {python}'s environment, which scikit-build-core runs "
                f"before PATH's: pin `{CMAKE_SPEC}` in the host requirements or remove it there")
    return ON_PATH
