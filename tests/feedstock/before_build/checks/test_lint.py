"""``python -m feedstock lint`` on the real feedstock and on copies broken the way people break them."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.feedstock_cli import run_feedstock_cli, snapshot
from tests.support.paths import RECIPE_VERSION

# each test lints a whole feedstock copy, every variant of every platform: 8 s or more on 2 cores
pytestmark = [pytest.mark.slow]


def lint(root: Path):
    proc = run_feedstock_cli("lint", root=root)
    assert "Traceback" not in proc.stderr
    return proc


def test_real_feedstock_has_no_findings():
    proc = run_feedstock_cli("lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no findings" in proc.stdout


def test_missing_patch_file(feedstock_copy):
    patch = sorted((feedstock_copy / "recipe" / "patches").glob("*.patch"))[0]
    patch.unlink()
    before = snapshot(feedstock_copy / ".ci_support")
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert f"patch patches/{patch.name} is listed but recipe/patches/{patch.name} does not exist" in proc.stdout
    assert snapshot(feedstock_copy / ".ci_support") == before


@pytest.mark.parametrize("listed, says", [
    ("../" * 40 + "etc/passwd", "resolves to /etc/passwd, outside the feedstock"),   # from any depth
    ("/etc/passwd", "/etc/passwd is an absolute path"),
    ("patches/0099-link.patch", "resolves to /etc/passwd, outside the feedstock"),
])
def test_a_patch_outside_the_feedstock_is_a_finding(feedstock_copy, listed, says):
    """Issue 35: a patch that leaves the tree (a symlink to /etc/passwd, an absolute or a ../
    path) gave "no findings"."""
    (feedstock_copy / "recipe" / "patches" / "0099-link.patch").symlink_to("/etc/passwd")
    meta = feedstock_copy / "recipe" / "meta.yaml"
    first = "    - patches/0001-cpp_extension-find-conda-CUDA-target-directory.patch\n"
    meta.write_text(meta.read_text().replace(first, first + f"    - {listed}\n"))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    [line] = [line for line in proc.stdout.splitlines() if "outside the feedstock" in line or "absolute" in line]
    assert line.startswith(f"recipe/meta.yaml: patch {listed}") and says in line, line
    assert line.endswith("; keep patches in recipe/patches/")


def test_unlisted_patch_file(feedstock_copy):
    extra = feedstock_copy / "recipe" / "patches" / "0099-forgotten.patch"
    extra.write_text("--- a/x\n+++ b/x\n")
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert "recipe/patches/0099-forgotten.patch: not listed under source/patches" in proc.stdout


def test_patch_listed_for_some_variants_only(feedstock_copy):
    # listed under a CUDA-only selector: neither the first nor the last linux-64 variant has it
    patches = feedstock_copy / "recipe" / "patches"
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    last = sorted(patches.glob("*.patch"))[-1].name
    anchor = f"    - patches/{last}\n"
    assert anchor in text
    line = '    - patches/0099-cuda-only.patch  # [gpu_backend == "cuda"]\n'
    meta.write_text(text.replace(anchor, anchor + line, 1))
    (patches / "0099-cuda-only.patch").write_text("--- a/x\n+++ b/x\n")
    proc = lint(feedstock_copy)
    assert "0099-cuda-only.patch" not in proc.stdout, proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # and such a patch is still checked for existence
    (patches / "0099-cuda-only.patch").unlink()
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert "patch patches/0099-cuda-only.patch is listed but recipe/patches/0099-cuda-only.patch does not exist" \
        in proc.stdout


def test_output_without_test(feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    # drop the metapackages' test section (the last "    test:" block before their about:)
    start = text.rindex("    test:\n      imports:\n        - torch\n")
    end = text.index("    about:", start)
    meta.write_text(text[:start] + text[end:])
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert "output 'pytorch-cpu' has no test" in proc.stdout


def test_negated_test_command_cannot_fail(feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    anchor = "        - test -f $PREFIX/lib/libtorch_cuda_linalg.so\n"
    assert anchor in text
    meta.write_text(text.replace(anchor, anchor + '        - "! grep -q libmagma $PREFIX/lib/libtorch_cuda_linalg.so"\n', 1))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert ("output 'libtorch-cuda-linalg' test command [! grep -q libmagma $PREFIX/lib/libtorch_cuda_linalg.so] "
            "cannot fail") in proc.stdout
    assert "linux-64" in proc.stdout


def test_unparseable_and_unknown_selectors(feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    meta.write_text(text.replace("- make                                       # [linux]",
                                 "- make                                       # [lnux]", 1))
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    cbc.write_text(cbc.read_text().replace("# [not linux]", "# [not linux or]", 1))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert "recipe/conda_build_config.yaml:" in proc.stdout and "[not linux or] does not parse" in proc.stdout
    line = next(i for i, t in enumerate(meta.read_text().splitlines(), 1) if "# [lnux]" in t)
    assert f"recipe/meta.yaml:{line}: selector [lnux] uses unknown name(s) lnux" in proc.stdout


def test_unequal_zip_keys(feedstock_copy):
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    cbc.write_text(cbc.read_text().replace("  - 7.2                         # [linux64]\n", "", 1))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert "zip_keys group [gpu_backend, cuda_compiler_version, rocm_version" in proc.stdout
    assert "different lengths on linux-64" in proc.stdout


def test_stale_ci_support_and_clashing_build_strings(feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    # a build string without the BLAS name: the mkl and generic jobs now build the same file
    text = text.replace('{% set variant_tag = dev_prefix ~ gpu_tag ~ "_" ~ blas_impl %}',
                        '{% set variant_tag = dev_prefix ~ gpu_tag %}')
    text = text.replace("{% set build = build + 100 %}", "")
    meta.write_text(text)
    config = sorted((feedstock_copy / ".ci_support").glob("*.yaml"))[0]
    config.write_text(config.read_text() + "extra_key:\n- x\n")
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert f".ci_support/{config.name}: out of date; run: python -m feedstock rerender" in proc.stdout
    assert f"build string not unique: linux-64/pytorch-cpu-{RECIPE_VERSION}-cpu_h" in proc.stdout


# -- the recipe against what the driver really does -------------------------------------------
def test_removing_a_use_system_package_from_host_fails(feedstock_copy):
    """The driver sets USE_SYSTEM_NVTX=1 on CUDA variants; without nvtx-c in host CMake would
    not find it hours into the build. Lint names the variable, the package and where to add it."""
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    top_level = "\n    - nccl\n    - nvtx-c\n"  # the top level's host (4-space indent)
    assert text.count(top_level) == 1
    meta.write_text(text.replace(top_level, "\n    - nccl\n", 1))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    lines = [line for line in proc.stdout.splitlines() if "USE_SYSTEM" in line]
    assert lines == ["recipe/meta.yaml: the driver sets USE_SYSTEM_NVTX=1 (megabuild/build_env.py) but "
                     "'nvtx-c' is not in the host requirements of libtorch-split (linux-64, linux-aarch64); "
                     "add nvtx-c to its host section"], proc.stdout


def test_removing_sleef_from_the_pytorch_output_fails_on_every_platform(feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    meta.write_text(text.replace("        - sleef\n        - six\n", "        - six\n", 1))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert ("the driver sets USE_SYSTEM_SLEEF=1 (megabuild/build_env.py) but 'sleef' is not in "
            "the host requirements of pytorch (linux-64, linux-aarch64, osx-arm64)") in proc.stdout


def test_driver_passing_the_conda_build_number_fails(feedstock_copy):
    """If the driver handed conda's build number (100-300 here) to PyTorch, torch would report
    <version>.post300; lint runs the copy's own driver and catches it."""
    build_env = feedstock_copy / "recipe" / "megabuild" / "build_env.py"
    text = build_env.read_text()
    old = '    env["PYTORCH_BUILD_NUMBER"] = "0"\n'
    assert old in text
    build_env.write_text(text.replace(old, '    env["PYTORCH_BUILD_NUMBER"] = variant.get("PKG_BUILDNUM", "0")\n'))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert (f"PyTorch will report {RECIPE_VERSION}.post300 (PYTORCH_BUILD_VERSION, PYTORCH_BUILD_NUMBER=300) "
            f"but the recipe expects {RECIPE_VERSION}; the driver must pass PYTORCH_BUILD_NUMBER=0") in proc.stdout
    # CPU generic builds have build number 0, which PyTorch does not append
    assert "cpu_generic" not in proc.stdout and "cpugeneric" not in proc.stdout


def test_a_recipe_without_a_version_test_fails(feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    lines = meta.read_text().splitlines(keepends=True)
    kept = [line for line in lines if "torch.__version__.split" not in line]
    assert len(kept) == len(lines) - 1
    meta.write_text("".join(kept))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert f"no test asserts torch.__version__; add one that compares it with '{RECIPE_VERSION}'" in proc.stdout


def test_duplicated_variant_key_is_one_clear_error(feedstock_copy):
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    lines = cbc.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("blas_impl:")) + 1
    cbc.write_text(cbc.read_text() + "\nblas_impl:\n  - generic\n")
    duplicate = len(lines) + 2
    for command in ("lint", "rerender"):
        proc = run_feedstock_cli(command, root=feedstock_copy)
        assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr
        assert (f"recipe/conda_build_config.yaml:{duplicate}: key 'blas_impl' is given twice (first at "
                f"line {first}) on linux-64") in proc.stdout + proc.stderr


MKL_X86 = "  - mkl                         # [x86_64]\n"
ROCM_72 = "  - 7.2                         # [linux64]\n"


@pytest.mark.parametrize("old, new, finding", [
    # a maintainer offering MKL on aarch64 too: the driver refuses, and the lint says so
    (MKL_X86, MKL_X86 + "  - mkl                         # [aarch64]\n",
     "recipe/conda_build_config.yaml: the build driver refuses config linux_aarch64_arm_variant_"
     "typesbsablas_implmklc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpu: blas_impl=mkl is not available on linux-aarch64; use blas_impl=generic there"),
    # a ROCm release the driver has no gfx list for (the rest of ROCm needs the build machine)
    (ROCM_72, "  - 9.9                         # [linux64]\n",
     "recipe/conda_build_config.yaml: the build driver refuses config linux_64_blas_implmkl"
     "c_stdlib_version2.28cuda_compiler_versionNonegpu_backendrocmrocm_version9.9: unknown ROCm "
     "version '9.9': no PYTORCH_ROCM_ARCH for it; known: 6.3, 6.4, 7.0, 7.1, 7.2 (add it to "
     "ROCM_ARCH_LISTS in megabuild/rocm.py, or set FEEDSTOCK_ROCM_ARCH)"),
])
def test_a_variant_the_driver_refuses_is_a_finding_not_a_traceback(feedstock_copy, old, new, finding):
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    text = cbc.read_text()
    assert old in text
    cbc.write_text(text.replace(old, new, 1))
    proc = lint(feedstock_copy)             # .ci_support/ is stale too: both are findings
    assert proc.returncode == 1
    assert finding in proc.stdout.splitlines(), proc.stdout
    assert "run: python -m feedstock rerender" in proc.stdout
    assert run_feedstock_cli("rerender", root=feedstock_copy).returncode == 0
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert finding in proc.stdout.splitlines(), proc.stdout


def test_selector_spacing_conda_smithy_lints(feedstock_copy):
    """Our lint is a superset of conda-smithy's for what both check: it flags a meta.yaml
    selector comment with one space before `#` (and none after it), as conda-smithy does."""
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    assert "- make                                       # [linux]" in text
    meta.write_text(text.replace("- make                                       # [linux]",
                                 "- make #[linux]", 1))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    line = next(i for i, t in enumerate(meta.read_text().splitlines(), 1) if "- make #[linux]" in t)
    assert (f"recipe/meta.yaml:{line}: selector [linux] should read `value  # [expr]`: two spaces "
            "before # and one after it (conda-smithy's lint)") in proc.stdout


def test_an_input_lint_cannot_read_stops_it_with_one_line(feedstock_copy):
    # before: a folder where conda_build_config.yaml belongs gave 79 findings and exit 1; a job
    # file that is not UTF-8 gave a traceback
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    cbc.unlink()
    cbc.mkdir()
    proc = run_feedstock_cli("lint", root=feedstock_copy)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: recipe/conda_build_config.yaml is a folder; a file belongs there"


def test_a_job_file_that_is_not_utf8_is_a_stale_file_finding(feedstock_copy):
    job = next((feedstock_copy / ".ci_support").glob("linux_64_*.yaml"))
    job.write_bytes(job.read_bytes() + b"# caf\xe9\n")
    proc = run_feedstock_cli("lint", root=feedstock_copy)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f".ci_support/{job.name}" in proc.stdout and "rerender" in proc.stdout


# --- upper bounds of the dependents a channel carries (recipe/dependents.yaml, channel: true) -----

@pytest.mark.parametrize("spec, bounded", [
    ("2.13.*", True), (">=2.0,<2.15", True), ("<=2.14", True), ("2.13.0", True), ("==2.13.0", True),
    ("~=2.13", True), (">=2.13.0,<2.14.0a0", True), (">=2.0", False), ("*", False), (">=2.0,!=2.5.0", False),
    (">=2.0,<2.15|2.15.*", True), (">=2.0,<2.15|>=2.16", False), ("", False),
])
def test_upper_bounded(spec, bounded):
    from feedstock.before_build.checks.dependent_bounds import upper_bounded

    assert upper_bounded(spec) is bounded


def test_a_channel_wheel_dependent_without_an_upper_bound_is_a_finding(feedstock_copy):
    catalog = feedstock_copy / "recipe" / "dependents.yaml"
    text = catalog.read_text()
    assert text.count('torch: ">=2.0,<2.15"') == 2
    catalog.write_text(text.replace('torch: ">=2.0,<2.15"', 'torch: ">=2.0"', 1))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert proc.stdout.splitlines().count(
        "recipe/dependents.yaml: einops (channel: true) has torch '>=2.0', no upper bound: its package's pytorch "
        "run constraint would admit every future pytorch; bound it (e.g. '>=2.0,<2.15') and lift it when "
        "`downstream --compare` says it works") == 1, proc.stdout
    assert "opt-einsum" not in proc.stdout  # still bounded
    # a dependent no channel carries needs no bound
    catalog.write_text(text.replace("    channel: true\n\n  - name: opt-einsum", "    channel: false\n\n  - name: opt-einsum")
                       .replace('torch: ">=2.0,<2.15"', 'torch: ">=2.0"', 1))
    assert "einops" not in lint(feedstock_copy).stdout


def test_an_sdist_dependent_is_bounded_by_the_run_exports(feedstock_copy):
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    pin = "{{ pin_subpackage('libtorch', max_pin='x.x') }}"
    assert text.count(pin) == 2  # libtorch's and pytorch's run_exports
    meta.write_text(text.replace(pin, pin.replace("max_pin='x.x'", "max_pin=None")))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    for name in ("torch-scatter", "torch-cluster"):
        assert (f"recipe/dependents.yaml: {name} (channel: true, built against our libtorch): the run_exports "
                f"pin 'libtorch >={RECIPE_VERSION}' has no upper bound; use max_pin='x.x' (no stable C++ ABI)"
                in proc.stdout.splitlines()), proc.stdout


@pytest.mark.parametrize("pin", ["cmake", "cmake >=3.18"])
def test_a_cmake_pin_other_than_the_drivers_range_fails(feedstock_copy, pin):
    """A bare `cmake` gets the newest release, whatever it is; an older floor lets in a CMake the
    driver refuses. Lint names the step and the range megabuild/tool_versions.py sets (parity
    reports the two recipes' difference too)."""
    meta = feedstock_copy / "recipe" / "meta.yaml"
    text = meta.read_text()
    assert text.count("        - cmake >=3.27,<5\n") == 1  # the pytorch output's build section
    meta.write_text(text.replace("        - cmake >=3.27,<5\n", f"        - {pin}\n", 1))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    lines = [line for line in proc.stdout.splitlines() if "CMake range" in line]
    assert lines == [f"recipe/meta.yaml: the build requirements of pytorch have {pin}, not 'cmake >=3.27,<5', "
                     "the CMake range the driver accepts and the suite tests (recipe/megabuild/tool_versions.py); "
                     "write 'cmake >=3.27,<5' (linux-64, linux-aarch64, osx-arm64)"], proc.stdout


def test_the_drivers_range_moves_the_check_with_it(feedstock_copy):
    """The range is written once: raise it in tool_versions.py and the recipe's pin is stale."""
    versions = feedstock_copy / "recipe" / "megabuild" / "tool_versions.py"
    versions.write_text(versions.read_text().replace('CMAKE_SPEC = "cmake >=3.27,<5"',
                                                     'CMAKE_SPEC = "cmake >=3.30,<5"'))
    proc = lint(feedstock_copy)
    assert proc.returncode == 1
    assert "the build requirements of libtorch-split have cmake >=3.27,<5, not 'cmake >=3.30,<5'" in proc.stdout
