"""Real conda packages: rattler-build builds recipe/recipe.yaml, py-rattler installs them elsewhere.

A local toolchain channel is built first (tests/support/toolchain.py, once per session); then
rattler-build builds the feedstock's own recipe.yaml, source overridden to the PyTorch-shaped
tests/support/megabuild_project, for the cpu/generic job with two Pythons (staging output + libtorch +
pytorch per Python + pytorch-cpu). py-rattler indexes the output, solves `pytorch-cpu` from that
channel alone and installs it into a fresh prefix at another path, where the packages are used
and checked: import torch, find_package(Torch) from the installed prefix, no file owned twice,
no build/host prefix path in any installed text file, every symlink inside the new prefix.

The recipe's own test sections ask for real PyTorch (torchrun, torch.backends, ...), which the
test project does not have, so rattler-build builds with its tests off here.

The build runs with every developer override set (DEVELOPER_SETTINGS: what build-locally.py's
--jobs, --heavy-jobs, --cuda-arch, --rocm-arch, --dev-tag, --compile-cache[-read-only] and
--ccache set, the cache password and the front-end override), none of which changes what the
test project compiles; the driver's first line in the build log must show each value with its
variable as the source: each one went through recipe.yaml and rattler-build for real.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.build_tools import NEWEST_CMAKE
from tests.support.paths import RECIPE_VERSION, REPO_ROOT

pytest.importorskip("rattler_build", reason="py-rattler-build (requirements-dev.txt) is not installed")
pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

from tests.realbuild.feedstock_build import ChannelIncomplete, build_feedstock, check_channel  # noqa: E402
from tests.realbuild.install import (escaping_symlinks, files_in_two_packages,  # noqa: E402
                                     install_from_channel, leaked_paths)

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.download]

OUR_PACKAGES = {"libtorch", "pytorch", "pytorch-cpu"}


SPLIT_PYTHON = "3.11"  # so that the last pytorch output, whose log survives, is a real switch (3.12)


def split_on(recipe: Path, python: str, dest: Path) -> Path:
    """A copy of the recipe folder whose staging output builds with `python`."""
    shutil.copytree(recipe.parent, dest)
    text = (dest / "recipe.yaml").read_text()
    assert text.count('  split_python: "3.12"\n') == 1
    (dest / "recipe.yaml").write_text(text.replace('  split_python: "3.12"\n', f'  split_python: "{python}"\n'))
    return dest / "recipe.yaml"


DEV_TAG = "realbuild"
CACHE_PASSWORD = "not-a-real-password-47"
SAME_FRONT_END = ("# the front end the test project declares, through the developer override\n"
                  "from megabuild.scikit_build import ScikitBuildCoreFrontend\n\n\n"
                  "def frontend():\n    return ScikitBuildCoreFrontend()\n")


def developer_settings(work: Path) -> dict[str, str]:
    """Every developer override (recipe/megabuild/overrides.py), each with a value that leaves
    the test project's compiles as they are: the arch lists are another backend's, the compile
    cache is an empty folder used read-only, the front end is the one the tree declares."""
    (work / "realbuild-compile-cache").mkdir(exist_ok=True)
    (work / "same_front_end.py").write_text(SAME_FRONT_END)
    return {"FEEDSTOCK_MAX_JOBS": "2", "FEEDSTOCK_HEAVY_JOBS": "1",
            "FEEDSTOCK_CUDA_ARCH_LIST": "10.0f;12.0f", "FEEDSTOCK_ROCM_ARCH": "gfx90a",
            "FEEDSTOCK_DEV_TAG": DEV_TAG, "FEEDSTOCK_COMPILE_CACHE": str(work / "realbuild-compile-cache"),
            "FEEDSTOCK_COMPILE_CACHE_READ_ONLY": "1", "FEEDSTOCK_COMPILE_CACHE_PASSWORD": CACHE_PASSWORD,
            "CCACHE_DIR": str(work / "realbuild-ccache-dir"), "MEGABUILD_FRONTEND": str(work / "same_front_end.py")}


@pytest.fixture(scope="session")
def realbuild(realbuild_toolchain: dict) -> dict:
    work, toolchain = realbuild_toolchain["work"], realbuild_toolchain["toolchain"]
    recipe = split_on(realbuild_toolchain["recipe"], SPLIT_PYTHON, work / "recipe-split-311")
    variant = realbuild_toolchain["cpu_variant"]
    build = build_feedstock(recipe, variant, toolchain.channel, work / "build_artifacts",
                            environ=developer_settings(work), keep_build=True)
    prefix = work / "elsewhere" / "env"
    install_from_channel(build.output_dir, ["pytorch-cpu", "python 3.11.*"], prefix,
                         extra_channels=[toolchain.channel], cache=work / "pkgs")
    return {"work": work, "toolchain": toolchain, "build": build, "prefix": prefix,
            "recipe": recipe, "variant": variant}


def test_packages_built(realbuild):
    names = realbuild["build"].names()
    tag = f"dev{DEV_TAG}_cpu_generic"   # FEEDSTOCK_DEV_TAG marks every build string
    assert any(n.startswith(f"libtorch-{RECIPE_VERSION}-{tag}_h") for n in names), names
    for py in ("311", "312"):
        assert any(n.startswith(f"pytorch-{RECIPE_VERSION}-{tag}_py{py}_h") for n in names), names
    assert any(n.startswith(f"pytorch-cpu-{RECIPE_VERSION}-{tag}_h") for n in names), names


def test_import_torch_in_the_installed_prefix(realbuild):
    python = realbuild["prefix"] / "bin" / "python"
    proc = subprocess.run([python, "-c", "import sys, torch, torch._C; print(sys.version_info[:2], torch.__file__)"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "(3, 11)" in proc.stdout and str(realbuild["prefix"]) in proc.stdout


def test_find_package_torch_from_the_installed_prefix(realbuild, tmp_path):
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(consumer CXX)\nfind_package(Torch REQUIRED)\n"
        "add_executable(consumer main.cpp)\ntarget_include_directories(consumer PRIVATE ${TORCH_INCLUDE_DIRS})\n"
        "target_link_libraries(consumer PRIVATE ${TORCH_LIBRARIES})\n")
    (project / "main.cpp").write_text('#include <c10/Core.h>\nint main() { return 0; }\n')
    prefix = realbuild["prefix"]
    for torch_dir in (prefix / "share/cmake/Torch", prefix / "lib/python3.11/site-packages/torch/share/cmake/Torch"):
        build = tmp_path / f"build-{torch_dir.parts[-4]}"
        conf = subprocess.run(["cmake", "-S", project, "-B", build, "-G", "Ninja", f"-DTorch_DIR={torch_dir}"],
                              capture_output=True, text=True, timeout=300)
        assert conf.returncode == 0, conf.stdout + conf.stderr
        done = subprocess.run(["cmake", "--build", build], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        run = subprocess.run([build / "consumer"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr


def test_no_file_in_two_packages(realbuild):
    assert files_in_two_packages(realbuild["prefix"]) == {}


def test_no_build_or_host_prefix_leaks(realbuild):
    bld = realbuild["build"].output_dir / "bld"
    needles = [str(bld), str(realbuild["work"] / "source"), "host_env_placehold"]
    assert leaked_paths(realbuild["prefix"], needles, OUR_PACKAGES) == []


def test_every_symlink_resolves_inside_the_prefix(realbuild):
    prefix = realbuild["prefix"]
    links = [p for p in (prefix / "lib/python3.11/site-packages/torch/lib").iterdir() if p.is_symlink()]
    assert links, "pytorch should link libtorch's libraries into $PREFIX/lib"
    assert escaping_symlinks(prefix, OUR_PACKAGES) == []


def test_missing_toolchain_package_is_named(realbuild, tmp_path):
    channel = tmp_path / "channel"
    shutil.copytree(realbuild["toolchain"].channel, channel,
                    ignore=shutil.ignore_patterns("bld", "build_cache", "src_cache", ".tmp", "ninja-*"))
    with pytest.raises(ChannelIncomplete) as err:
        check_channel(realbuild["recipe"], realbuild["variant"], channel)
    assert "has no package 'ninja'" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_scikit_build_core_front_end_kept_the_build_across_outputs(realbuild):
    """PyTorch 2.14's build in rattler-build's own outputs, on the toolchain channel's CMake (PyPI's
    newest tested release): the staging output configured and compiled the project through
    scikit-build-core against 3.11; the pytorch output for 3.12 (its own host environment, its
    own scikit-build-core) reconfigured into the same build folder, cleared nothing and compiled
    exactly the Python-dependent objects. (rattler-build keeps one work folder per staging
    group, so the log that survives is the staging's followed by its last output's.)"""
    logs = sorted(realbuild["build"].output_dir.glob("bld/*/work/conda_build.log"))
    text = next((log.read_text(errors="replace") for log in logs if "==> pytorch (megabuild driver)" in
                 log.read_text(errors="replace")), None)
    assert text is not None, logs
    split, pytorch = text.split("==> pytorch (megabuild driver)", 1)
    assert "front end: ScikitBuildCoreFrontend" in split and "front end: ScikitBuildCoreFrontend" in pytorch
    for part in (split, pytorch):
        assert f"scikit-build-core 1.1.2 using CMake {NEWEST_CMAKE} (wheel)" in part
    assert f"build against Python {SPLIT_PYTHON}" in split and "build and install for Python 3.12" in pytorch
    assert "Building CXX object CMakeFiles/torch_cpu.dir/" in split  # the core compiled in the staging
    assert "Configuring CMake" in pytorch and "Build files have been written to: $SRC_DIR/megabuild-build" in pytorch
    built = [line for line in pytorch.splitlines() if "Building C" in line]
    targets = {line.split("CMakeFiles/")[1].split(".dir/")[0] for line in built}
    assert targets == {"torch_python", "_C"}, built  # every Python-dependent object, nothing else
    assert len(built) == 3, built
    for cleared in ("clearing cache", "New isolated environment"):
        assert cleared not in text


def first_driver_line(lines: list[str], start: int) -> str:
    """The first line the driver printed for the step whose `==>` line is lines[start]: the
    driver's lines just before it back to the previous step's `<==` (or the log's start)."""
    first = start
    for i in range(start - 1, -1, -1):
        if "[megabuild] " not in lines[i]:
            continue
        if "[megabuild] <== " in lines[i] or "[megabuild] ==> " in lines[i]:
            break
        first = i
    return lines[first]


def test_the_driver_received_every_developer_setting(realbuild):
    """Issue 47: conda-build dropped the developer settings its script_env did not list, and the
    build went on with defaults without a word. Every driver step's first line names each
    setting with its source; in rattler-build's own build of recipe.yaml each override must show
    its value and its variable, in every step whose log survives (the staging's and the last
    output's), and the cache password must never show."""
    logs = sorted(realbuild["build"].output_dir.glob("bld/*/work/conda_build.log"))
    text = "\n".join(log.read_text(errors="replace") for log in logs)
    lines = text.splitlines()
    steps = [i for i, line in enumerate(lines) if re.search(r"\[megabuild\] ==> \S+ \(megabuild driver\)", line)]
    assert {lines[i].split("==> ")[1].split()[0] for i in steps} >= {"libtorch-split", "pytorch"}, logs
    expected = [r"jobs 2 \(FEEDSTOCK_MAX_JOBS\)", r"heavy jobs 1 \(FEEDSTOCK_HEAVY_JOBS\)",
                r"cuda archs 10\.0f;12\.0f \(FEEDSTOCK_CUDA_ARCH_LIST, ignored: a cpu build\)",
                r"rocm archs gfx90a \(FEEDSTOCK_ROCM_ARCH, ignored: a cpu build\)",
                rf"dev tag {DEV_TAG} \(FEEDSTOCK_DEV_TAG\)",
                r"compile cache \S+/realbuild-compile-cache \(FEEDSTOCK_COMPILE_CACHE\)",
                r"ccache dir \S+/realbuild-ccache-dir \(CCACHE_DIR, ignored: FEEDSTOCK_COMPILE_CACHE wins\)",
                r"compile cache read-only yes \(FEEDSTOCK_COMPILE_CACHE_READ_ONLY\)",
                r"compile cache password set \(FEEDSTOCK_COMPILE_CACHE_PASSWORD\)",
                r"front end \S+/same_front_end\.py \(MEGABUILD_FRONTEND\)"]
    for i in steps:
        settings = first_driver_line(lines, i)
        assert "[megabuild] settings: " in settings, (lines[i], settings)
        for part in expected:
            assert re.search(part, settings), (part, settings)
        assert "(default)" not in settings, settings
    assert CACHE_PASSWORD not in text
