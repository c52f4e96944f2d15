"""build-locally.py CONFIG --native --develop PATH, for real: the develop environment solved and
installed by py-rattler from the local toolchain channel (the pytorch output's build and host
requirements for the cpu job), then the driver's develop step building a checkout of the
PyTorch-shaped test project (its scikit-build-core form) with the channel's CMake and Ninja
(PyPI's releases). An edit of one core file recompiles that one object, the installed torch
shows it, and the checkout stays byte for byte as it was, but for the edit.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.develop_checkout import (EDITED, changed_paths, develop_checkout, edit_core_file,
                                            recompiled_counts, recompiled_line, tree_state)
from tests.support.podman import CPU, PYTHON, config_texts, podman_feedstock
from tests.support.scratch import module_scratch
from tests.support.terminal import in_a_terminal

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.download]



class Rig:
    def __init__(self, root: Path, checkout: Path, channel: Path, env: dict[str, str]) -> None:
        self.root, self.checkout, self.channel, self.env = root, checkout, channel, env
        self.folder = root / "build_artifacts" / "develop" / f"{CPU}-{PYTHON}"
        self.config = CPU

    def args(self, *extra: str) -> list[str]:
        return [sys.executable, str(self.root / "build-locally.py"), self.config, "--native", "--develop",
                str(self.checkout), "--channel", str(self.channel), "--min-free-gb", "2", *extra]

    def run(self, *extra: str, timeout: float = 1200) -> subprocess.CompletedProcess:
        return subprocess.run(self.args(*extra), cwd=self.root, env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def torch_value(self) -> float:
        python = self.folder / "env" / "bin" / "python"
        proc = subprocess.run([str(python), "-c", "import torch; print(torch._C.self_test())"],
                              capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(self.folder / "env" / "lib")})
        assert proc.returncode == 0, proc.stderr
        return float(proc.stdout)


@pytest.fixture(scope="module")
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, realbuild_toolchain: dict):
    from tests.realbuild.feedstock_build import prepare_project_source

    work = module_scratch(request, tmp_path_factory, "develop")
    root = podman_feedstock(work / "feedstock", prepare_project_source(work / "source"),
                            {CPU: config_texts(realbuild_toolchain["versions"], work)[CPU]})
    checkout = develop_checkout(work / "checkout")
    env = dict(os.environ, RATTLER_BUILD_PYTHON=sys.executable, CPU_COUNT="2")
    rig = Rig(root, checkout, realbuild_toolchain["toolchain"].channel, env)
    rig.before = tree_state(checkout)
    rig.first = rig.run()
    return rig


def test_the_first_run_makes_the_environment_and_builds_every_object(rig):
    out = rig.first.stdout + rig.first.stderr
    assert rig.first.returncode == 0, out[-4000:]
    assert "environment: making" in out and "no environment yet" in out, out[-3000:]
    count, total = recompiled_counts(out)
    assert count == total > 5, recompiled_line(out)
    assert (rig.folder / "develop-done").is_file()
    assert rig.torch_value() > 0


def test_a_run_without_an_edit_reuses_the_environment_and_recompiles_nothing(rig):
    assert rig.first.returncode == 0
    proc = rig.run()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "is current" in out and "environment: making" not in out, out[-3000:]
    assert " recompiled 0 of " in recompiled_line(out), recompiled_line(out)


def test_an_edit_recompiles_that_object_and_the_installed_torch_shows_it(rig):
    assert rig.first.returncode == 0
    before = rig.torch_value()
    edit_core_file(rig.checkout)
    proc = rig.run()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    line = recompiled_line(out)
    assert " recompiled 1 of " in line and "Ops.cpp.o" in line, line
    assert rig.torch_value() == pytest.approx(before + 1000.0)
    # the checkout: byte for byte as it was, but for the edit (no build output, no __pycache__)
    changed = changed_paths(rig.before, tree_state(rig.checkout))
    assert changed == [EDITED], changed[:20]


def test_the_dry_run_shows_the_environment_compiler_include_order_and_cmake(rig):
    assert rig.first.returncode == 0
    proc = rig.run("--dry-run")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    env = rig.folder / "env"
    assert f"environment: {env}, made natively" in out, out
    include = next(line for line in out.splitlines() if "include order:" in line)
    order = include.split("include order: ", 1)[1].split(" -> ")
    assert order[0] == str(env / "include") and any(p.startswith("/usr/include") for p in order[1:]), include
    assert "cmake:" in out and "cmake version 4." in out, out
    assert f"LD_LIBRARY_PATH={env / 'lib'}" in out


def test_the_shell_is_the_build_environment_with_a_rebuild_line(rig):
    assert rig.first.returncode == 0
    command = shlex.join(rig.args("--shell"))
    typed = ('echo "CXXFLAGS=$CXXFLAGS"; echo "LD=$LD_LIBRARY_PATH"; '
             # from another folder: in the checkout, its own torch/ would shadow the installed one
             'cd / && python -c "import torch; print(\'value\', torch._C.self_test())"; exit\n')
    code, shown = in_a_terminal(f"cd {shlex.quote(str(rig.root))} && {command}", typed, rig.env, timeout=600)
    assert code == 0, shown[-3000:]
    assert f"rebuild after an edit with: bash {rig.folder / 'rebuild'}" in shown, shown[-3000:]
    assert f"-isystem {rig.folder / 'env' / 'include'}" in shown, shown[-3000:]
    assert f"LD={rig.folder / 'env' / 'lib'}" in shown and "value " in shown, shown[-3000:]


def test_a_recipe_change_makes_the_environment_again_and_says_why(rig):
    assert rig.first.returncode == 0
    recipe = rig.root / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    marker = "  - package:\n      name: pytorch\n"
    start = text.index(marker)
    ninja = text.index("        - ninja\n", start)
    recipe.write_text(text[:ninja] + "        - ninja >=1.10\n" + text[ninja + len("        - ninja\n"):])
    proc = rig.run()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "the recipe's requirements changed (+ninja >=1.10, -ninja)" in out, out[-3000:]


# -- a ROCm config: the system's HIP (Debian's hipcc) with the environment's compilers ----------
ROCM = "linux_64_blas_implgenericc_stdlib_version2.28cuda_compiler_versionNonegpu_backendrocmrocm_version7.2"
# what the ROCm build writes into the checkout, as every ROCm build of PyTorch does: hipify's
# HIP sources (the test project's script also logs its runs) and the driver's marker
HIPIFY_OUTPUTS = ("hip", "hipify-runs.log", "megabuild-hipify.done")


def rocm_config_text(versions: dict[str, str], work: Path) -> str:
    import yaml

    from tests.realbuild.session import machine_variant

    data = yaml.safe_load(machine_variant(ROCM, (PYTHON,), versions, work / "rocm-variant.yaml").read_text())
    data.pop("is_python_min", None)  # zipped with python: one Python, one value
    data["zip_keys"] = [keys for keys in data.get("zip_keys", []) if "is_python_min" not in keys]
    return yaml.safe_dump(data, sort_keys=True)


@pytest.fixture(scope="module")
def rocm_rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             realbuild_toolchain: dict, torch_wheel: Path):
    from tests.realbuild.feedstock_build import prepare_project_source
    from tests.support import megabuild_harness as harness

    try:
        harness.check_rocm_tools()
    except harness.HarnessUnavailable as err:
        pytest.skip(str(err))
    work = module_scratch(request, tmp_path_factory, "develop-rocm")
    root = podman_feedstock(work / "feedstock", prepare_project_source(work / "source"),
                            {ROCM: rocm_config_text(realbuild_toolchain["versions"], work)})
    checkout = develop_checkout(work / "checkout")
    harness.install_hipify(checkout, torch_wheel)   # PyTorch's own hipify, where a checkout has it
    env = dict(os.environ, RATTLER_BUILD_PYTHON=sys.executable, CPU_COUNT="2")
    env.pop("ROCM_PATH", None)
    rig = Rig(root, checkout, realbuild_toolchain["toolchain"].channel, env)
    rig.folder = root / "build_artifacts" / "develop" / f"{ROCM}-{PYTHON}"
    rig.before = tree_state(checkout)
    rig.config = ROCM
    rig.first = rig.run("--rocm-arch", "gfx90a")
    return rig


def test_a_rocm_config_builds_with_the_systems_hip_and_an_edit_recompiles_one_object(rocm_rig):
    out = rocm_rig.first.stdout + rocm_rig.first.stderr
    assert rocm_rig.first.returncode == 0, out[-4000:]
    assert "PYTORCH_ROCM_ARCH=gfx90a" in (rocm_rig.folder / "work" / "build-env.sh").read_text()
    count, total = recompiled_counts(out)
    assert count == total > 5
    from megabuild.ninja_log import last_entries

    objects = last_entries(rocm_rig.folder / "build")
    assert any("Kernels.hip" in name for name in objects), sorted(objects)   # hipcc compiled the kernel
    edit_core_file(rocm_rig.checkout)
    proc = rocm_rig.run("--rocm-arch", "gfx90a")
    again = proc.stdout + proc.stderr
    assert proc.returncode == 0, again[-3000:]
    assert recompiled_counts(again) == (1, total), recompiled_line(again)
    # the environment's compilers with the system's HIP: LD_LIBRARY_PATH names both
    variables = (rocm_rig.folder / "work" / "build-env.sh").read_text()
    assert f"LD_LIBRARY_PATH={rocm_rig.folder / 'env' / 'lib'}:/usr/lib" in variables, variables
    changed = changed_paths(rocm_rig.before, tree_state(rocm_rig.checkout))
    unnamed = [path for path in changed if path != EDITED and path.split("/")[0] not in HIPIFY_OUTPUTS]
    assert unnamed == [], unnamed
    assert "megabuild-hipify.done" in changed and any(p.startswith("hip/") for p in changed)


# -- a free-threaded Python: 3.13t (built from Debian's source once per machine) ----------------
FREE_THREADED = "3.13t"


def free_threaded_config_text(versions: dict[str, str], work: Path) -> str:
    """The cpu job with this machine's compilers and one Python, 3.13t (the job's own
    free-threaded entry is 3.14t, which this machine does not have)."""
    import yaml

    from tests.realbuild.session import machine_variant

    data = yaml.safe_load(machine_variant(CPU, (PYTHON,), versions, work / "ft-variant.yaml").read_text())
    data["python"], data["is_freethreading"] = ["3.13.* *_cp313t"], ["true"]
    data.pop("is_python_min", None)
    data["zip_keys"] = [keys for keys in data.get("zip_keys", []) if "is_python_min" not in keys]
    return yaml.safe_dump(data, sort_keys=True)


@pytest.fixture(scope="module")
def free_threaded_rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                      realbuild_toolchain: dict):
    from tests.realbuild.feedstock_build import copy_recipe, prepare_project_source
    from tests.support.free_threaded_python import FreeThreadedUnavailable, free_threaded_python
    from tests.support.machine_cache import cached_build, toolchain_key
    from tests.support.toolchain import ToolchainUnavailable, build_toolchain_channel

    work = module_scratch(request, tmp_path_factory, "develop-ft")
    try:
        interpreter = free_threaded_python(work / "python-build")
    except FreeThreadedUnavailable as err:
        pytest.skip(str(err))
    versions = realbuild_toolchain["versions"]
    text = free_threaded_config_text(versions, work)
    (work / "ft-job.yaml").write_text(text)
    recipe = copy_recipe(work / "recipe", prepare_project_source(work / "source", "scikit-build-core"))
    pythons = {FREE_THREADED: interpreter}
    # python 3.13t, the cp313t wheels and the machine's tools, for the build and host environments
    # only (the run and test requirements have pins without a cp313t wheel: MarkupSafe 3.0.4);
    # a machine-cache name of its own: one name keeps one entry, and the suite's main toolchain
    # channel must outlive this one
    try:
        channel = cached_build("toolchain-free-threaded", toolchain_key(versions, pythons),
                               lambda entry: build_toolchain_channel(entry, pythons, recipe, [work / "ft-job.yaml"],
                                                                     run_and_test=False)).channel
    except ToolchainUnavailable as err:
        pytest.skip(str(err))
    root = podman_feedstock(work / "feedstock", prepare_project_source(work / "source2"), {CPU: text})
    rig = Rig(root, develop_checkout(work / "checkout"), channel,
              dict(os.environ, RATTLER_BUILD_PYTHON=sys.executable, CPU_COUNT="2"))
    rig.folder = root / "build_artifacts" / "develop" / f"{CPU}-{FREE_THREADED}"
    rig.first = rig.run("--python", FREE_THREADED)
    return rig


def test_a_free_threaded_python_builds_an_extension_that_keeps_the_gil_off(free_threaded_rig):
    rig = free_threaded_rig
    out = rig.first.stdout + rig.first.stderr
    assert rig.first.returncode == 0, out[-4000:]
    count, total = recompiled_counts(out)
    assert count == total > 5
    python = rig.folder / "env" / "bin" / "python"
    proc = subprocess.run([str(python), "-c", "import sys, torch; print(torch._C.__file__, sys._is_gil_enabled(), "
                           "torch._C.self_test())"], capture_output=True, text=True, timeout=120, cwd="/",
                          env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(rig.folder / "env" / "lib")})
    assert proc.returncode == 0, proc.stderr
    library, gil, _ = proc.stdout.split()
    assert "cpython-313t" in library and gil == "False", proc.stdout
    edit_core_file(rig.checkout)
    again = rig.run("--python", FREE_THREADED)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert recompiled_counts(again.stdout + again.stderr) == (1, total)
