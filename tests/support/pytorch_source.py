"""A PyTorch-shaped source built for the maintainer-tool tests (bump, deps, patches).

A real git repository with real submodules (added from local paths, tagged and committed as
upstream does), the wheel's real ``torch/utils/cpp_extension.py`` (the file two of the recipe's
patches change), the version files release tarballs carry, and ``.ci/docker`` scripts; packed as
``pytorch-vX.Y.Z/`` tarballs the way the release tarball is laid out.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
           "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
RECIPE_PATCHES = Path(__file__).resolve().parents[2] / "recipe" / "patches"
CPP_EXTENSION = "torch/utils/cpp_extension.py"
ATEN_CMAKE = "aten/src/ATen/CMakeLists.txt"
# the lines of aten/src/ATen/CMakeLists.txt around ATEN_INCLUDE_DIR (PyTorch 2.13.0), below filler
ATEN_CMAKE_TAIL = """\
  # list(APPEND ATen_HIP_DEPENDENCY_LIBS ATEN_CUDA_FILES_GEN_LIB)
endif()

set(ATEN_INCLUDE_DIR "${CMAKE_INSTALL_PREFIX}/${AT_INSTALL_INCLUDE_DIR}")
configure_file(ATenConfig.cmake.in "${CMAKE_CURRENT_BINARY_DIR}/cmake-exports/ATenConfig.cmake")
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/cmake-exports/ATenConfig.cmake"
  DESTINATION "${AT_INSTALL_SHARE_DIR}/cmake/ATen")
"""
ATEN_FILLER_LINES = 950   # the 2.13.0 hunk says line 963: the patch must apply at an offset


def git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(["git", "-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main", *args],
                          cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV})
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def make_repo(path: Path, files: dict[str, str], tag: str | None = None, commits_after_tag: int = 0) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", cwd=path)
    _write(path, files)
    git("add", "-A", cwd=path)
    git("commit", "-qm", "initial", cwd=path)
    if tag:
        git("tag", "-a", tag, "-m", tag, cwd=path)
    for number in range(commits_after_tag):
        (path / "CHANGES").write_text(f"change {number}\n")
        git("add", "CHANGES", cwd=path)
        git("commit", "-qm", f"change {number}", cwd=path)
    return path


def wheel_file(wheel: Path, rel: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(rel).decode("utf-8")


def wheel_header(wheel: Path, rel: str) -> str | None:
    """A source header (torch/csrc/...) as the wheel ships it (torch/include/torch/csrc/...), if it does."""
    if not rel.startswith("torch/csrc/"):
        return None
    try:
        return wheel_file(wheel, "torch/include/" + rel)
    except KeyError:
        return None


def preimage(patch_files: list[Path], rel: str) -> str:
    """``rel`` as far as the patches show it (context and removed lines at the lines their hunks
    name; numbered filler elsewhere). For CMake files, which the wheel does not ship."""
    placed: dict[int, str] = {}
    for patch in patch_files:
        current = None
        line_no = 0
        for line in patch.read_text().splitlines():
            if line.startswith("+++ "):
                current = line[4:].split("/", 1)[1]
            elif line.startswith("@@ ") and current == rel:
                line_no = int(re.match(r"@@ -(\d+)", line).group(1))
            elif current == rel and line_no and line[:1] in (" ", "-", ""):
                placed.setdefault(line_no, line[1:])
                line_no += 1
            elif line.startswith("diff --git") or line == "-- ":
                current = None
    last = max(placed, default=0)
    return "".join(placed.get(n, f"# filler {n}") + "\n" for n in range(1, last + 1))


def patched_files(wheel: Path, patch_dir: Path) -> dict[str, str]:
    """Every file the recipe's patches touch: real ones from the wheel where it ships them."""
    patches = sorted(patch_dir.glob("*.patch"))
    touched = sorted({m.group(1) for p in patches for m in re.finditer(r"^\+\+\+ b/(\S+)", p.read_text(), re.M)})
    files = {}
    for rel in touched:
        if rel == CPP_EXTENSION:
            files[rel] = wheel_file(wheel, CPP_EXTENSION)
        elif rel == ATEN_CMAKE:
            files[rel] = "".join(f"# line {n}\n" for n in range(ATEN_FILLER_LINES)) + ATEN_CMAKE_TAIL
        else:
            files[rel] = wheel_header(wheel, rel) or preimage(patches, rel)
    return files


def source_files(wheel: Path, version: str, triton: str, patch_dir: Path = RECIPE_PATCHES) -> dict[str, str]:
    """The top-level files of the PyTorch repository the tests need."""
    return {
        **patched_files(wheel, patch_dir),
        "version.txt": f"{version}a0\n",
        "pyproject.toml": '[project]\nname = "torch"\nrequires-python = ">=3.10"\n',
        ".ci/docker/triton_version.txt": f"{triton}\n",
        ".ci/docker/common/install_cuda.sh": (
            "#!/bin/bash\nset -ex\n"
            "function install_126 {\n  CUDA_VERSION=12.6.3\n  echo $CUDA_VERSION\n}\n"
            "function install_128 {\n  CUDA_VERSION=12.8.1\n}\n"
            "function install_130 {\n  CUDA_VERSION=13.0.0\n}\n"),
        ".ci/docker/common/install_magma.sh": "#!/bin/bash\nMAGMA_VERSION=2.6.1\n",
        ".ci/docker/common/install_mkl.sh": "#!/bin/bash\nset -ex\nMKL_VERSION=2024.2.0\npip install mkl==$MKL_VERSION\n",
    }


def build_checkout(root: Path, wheel: Path, version: str = "9.9.9", triton: str = "3.8.0") -> Path:
    """``root``/pytorch: a git checkout with submodules (one nested), tagged v<version>."""
    upstream = root / "upstream"
    googletest = make_repo(upstream / "googletest", {"CMakeLists.txt": "project(googletest-distribution)\n"},
                           tag="release-1.11.0")
    protobuf = make_repo(upstream / "protobuf", {
        "src/google/protobuf/stubs/common.h": "#define GOOGLE_PROTOBUF_VERSION 3013000\n",
        "CMakeLists.txt": "project(protobuf C CXX)\n"})
    git("submodule", "add", "-q", str(googletest), "third_party/googletest", cwd=protobuf)
    git("commit", "-qm", "googletest submodule", cwd=protobuf)
    fmt = make_repo(upstream / "fmt", {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.8)\nproject(FMT CXX)\n",
                                       "include/fmt/base.h": "#define FMT_VERSION 110200\n"}, tag="11.2.0")
    sleef = make_repo(upstream / "sleef", {"CMakeLists.txt": "project(SLEEF VERSION 3.8.0 LANGUAGES C)\n"},
                      tag="3.8", commits_after_tag=2)
    nccl = make_repo(upstream / "nccl", {"makefiles/version.mk": "##### version\nNCCL_MAJOR   := 2\n"
                                         "NCCL_MINOR   := 27\nNCCL_PATCH   := 5\nNCCL_SUFFIX  :=\nPKG_REVISION := 1\n"},
                     tag="v2.27.5-1")
    checkout = make_repo(root / "pytorch", source_files(wheel, version, triton))
    for name, repo in (("fmt", fmt), ("nccl", nccl), ("protobuf", protobuf), ("sleef", sleef)):
        git("submodule", "add", "-q", str(repo), f"third_party/{name}", cwd=checkout)
    git("submodule", "update", "-q", "--init", "--recursive", cwd=checkout)
    git("commit", "-qm", "submodules", cwd=checkout)
    git("tag", "-a", f"v{version}", "-m", f"v{version}", cwd=checkout)
    return checkout


def pack(tree: Path, top: str, dest: Path) -> Path:
    """``tree`` (without git metadata) as ``dest`` = a tarball whose single top directory is ``top``."""
    def no_git(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if ".git" in info.name.split("/") else info

    with tarfile.open(dest, "w:gz") as archive:
        archive.add(tree, arcname=top, filter=no_git)
    return dest


def copy_tree(checkout: Path, dest: Path) -> Path:
    """A plain copy of the checkout's files (as an unpacked release tarball: no .git)."""
    shutil.copytree(checkout, dest, ignore=lambda d, names: [n for n in names if n == ".git"])
    return dest
