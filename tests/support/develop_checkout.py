"""A developer's checkout for the --develop tests and benchmark: the test project's
scikit-build-core form, one edit of a core file, and the tree's state to prove nothing else
changed."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

EDITED = "aten/Ops.cpp"   # a core library file: torch_cpu, one object
ORIGINAL = "return MEGATEST_CALL_ALL_UNITS(seed); }"
EDIT = "return MEGATEST_CALL_ALL_UNITS(seed) + 1000.0; }"   # torch._C.self_test() grows by 1000


def develop_checkout(dest: Path) -> Path:
    """The test project's scikit-build-core form as a developer's checkout: its stand-in for
    NNPACK's six download (a fatal error, the package build's guard) emptied, as a checkout
    that builds offline has it; the develop step never edits the checkout itself."""
    from tests.realbuild.feedstock_build import prepare_project_source

    checkout = prepare_project_source(dest, "scikit-build-core")
    (checkout / "third_party" / "NNPACK" / "cmake" / "DownloadSix.cmake").write_text("# six: offline\n")
    return checkout


def stand_in_checkout(dest: Path) -> Path:
    """Just enough of a PyTorch checkout for build-locally's --develop checks to accept it, for
    tests whose build is a stand-in that never reads it (the lifecycle tests)."""
    (dest / "torch").mkdir(parents=True)
    (dest / "CMakeLists.txt").write_text("project(torch)\n")
    (dest / "pyproject.toml").write_text('[build-system]\nbuild-backend = "scikit_build_core.build"\n')
    (dest / "version.txt").write_text("2.14.1\n")
    return dest


def edit_core_file(checkout: Path) -> None:
    path = checkout / EDITED
    text = path.read_text()
    if ORIGINAL not in text:
        raise AssertionError(f"{path} no longer has the line the edit changes")
    path.write_text(text.replace(ORIGINAL, EDIT))


def tree_state(root: Path) -> dict[str, tuple]:
    """relative path -> (kind, mode, sha256 or link target) of everything under root."""
    state: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        info = path.lstat()
        if path.is_symlink():
            state[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            state[rel] = ("dir", info.st_mode)
        else:
            state[rel] = ("file", info.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
    return state


def changed_paths(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


def recompiled_line(out: str) -> str:
    """The develop step's `develop: recompiled K of M objects` line."""
    return next(line for line in out.splitlines() if "develop: recompiled" in line)


def recompiled_counts(out: str) -> tuple[int, int]:
    count, total = recompiled_line(out).split("recompiled ")[1].split(" objects")[0].split(" of ")
    return int(count), int(total)
