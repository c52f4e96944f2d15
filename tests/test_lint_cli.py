"""``python -m feedstock lint`` on the real feedstock and on copies broken the way people break them."""
from __future__ import annotations

from pathlib import Path

from conftest import run_feedstock_cli, snapshot


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
    assert "build string not unique: linux-64/pytorch-cpu-2.13.0-cpu_h" in proc.stdout
