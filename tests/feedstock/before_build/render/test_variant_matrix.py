"""The variant engine on the real recipe/conda_build_config.yaml and pinning.yaml.

config files -> per-platform spec (selectors applied) -> full matrix -> used keys -> CI jobs.
"""
from __future__ import annotations


import pytest

from tests.support.paths import REPO_ROOT
from feedstock.before_build.ci.jobs import platform_jobs
from feedstock.errors import FeedstockError
from feedstock.layout import load_feedstock
from feedstock.before_build.render.matrix import explode, loop_keys
from feedstock.platforms import Platform, selector_namespace
from feedstock.before_build.render.selectors import select_lines
from feedstock.before_build.render.variant_config import load_variant_spec, zip_groups
from feedstock.before_build.render.variants import analyse_platform

LINUX64, AARCH64, OSX_ARM64 = Platform("linux-64"), Platform("linux-aarch64"), Platform("osx-arm64")


@pytest.fixture(scope="module")
def feedstock():
    return load_feedstock(REPO_ROOT)


def spec_for(feedstock, platform):
    return load_variant_spec(feedstock.variant_config_files(), platform, feedstock.root,
                             feedstock.build_platform(platform))


@pytest.mark.parametrize("platform, true_names, false_names", [
    (LINUX64, {"linux", "linux64", "x86_64", "unix", "x86"}, {"osx", "win", "aarch64", "arm64"}),
    (AARCH64, {"linux", "aarch64", "unix"}, {"linux64", "x86_64", "osx", "arm64"}),
    (OSX_ARM64, {"osx", "arm64", "unix"}, {"linux", "x86_64", "aarch64", "win"}),
])
def test_selector_names_per_platform(platform, true_names, false_names):
    ns = selector_namespace(platform)
    assert all(ns[n] is True for n in true_names), {n: ns[n] for n in true_names}
    assert all(ns[n] is False for n in false_names), {n: ns[n] for n in false_names}


def test_select_lines_follows_conda_build_rules():
    text = ("a: 1  # [linux and x86_64]\n"
            "b: 2  # [not osx]\n"
            "# a comment [osx]\n"
            "c: 3  # [megabuild]\n"
            "d: 4  # [cuda_compiler_version != \"None\"]\n"
            "e: 5  # [undefined_name]\n")
    variant = {"megabuild": "true", "cuda_compiler_version": "12.9"}
    linux = select_lines(text, selector_namespace(LINUX64, variant))
    assert linux.splitlines() == ["a: 1", "b: 2", "", "c: 3", "d: 4"]
    osx = select_lines(text, selector_namespace(OSX_ARM64, {"megabuild": "false", "cuda_compiler_version": "None"}))
    assert osx.splitlines() == [""]


@pytest.mark.parametrize("line, text, selector", [
    ("a: 1  # [linux and x86_64]", "a: 1", "linux and x86_64"),
    ("- cmake [unix]", "- cmake", "unix"),                               # no '#' needed
    ('- "x y"  # [osx]', '- "x y"', "osx"),                              # closing quote kept
    ("- foo  # [linux] trailing words", "- foo", "linux"),               # text after a comment's selector
    ("- foo  # see [a] then [b]", "- foo", "b"),                         # the last bracket in the comment
    ("see [docs](https://x.org)", "see [docs](https://x.org)", None),    # a markdown link
    ("- bar  # [a](b)", "- bar  # [a](b)", None),                        # parentheses after it: no selector
    ("- [x] y", "- [x] y", None),                                        # not at the end, no comment
    ("[linux]", "[linux]", None),                                        # nothing before it
])
def test_split_selectors_finds_the_selector_as_conda_build_does(line, text, selector):
    from feedstock.before_build.render.selectors import split_selectors

    (found,) = split_selectors(line + "\n")
    assert (found.text, found.selector) == (text, selector)


def test_bad_selector_is_one_line_naming_file_and_line():
    with pytest.raises(FeedstockError) as err:
        select_lines("a: 1\nb: 2  # [linux and]\n", selector_namespace(LINUX64), "recipe/x.yaml")
    assert str(err.value).startswith("recipe/x.yaml:2: selector [linux and] does not parse")
    assert "\n" not in str(err.value)


def test_linux64_spec_has_every_gpu_backend_zipped_with_its_image(feedstock):
    spec = spec_for(feedstock, LINUX64)
    assert spec["gpu_backend"] == ["cpu", "cuda", "cuda", "rocm"]
    assert spec["cuda_compiler_version"] == ["None", "12.9", "13.0", "None"]
    group = next(g for g in zip_groups(spec) if "gpu_backend" in g)
    assert {"cuda_compiler_version", "docker_image"} <= set(group)
    assert len({len(spec[k]) for k in group}) == 1
    rocm_image = spec["docker_image"][spec["gpu_backend"].index("rocm")]
    cuda_image = spec["docker_image"][spec["gpu_backend"].index("cuda")]
    assert rocm_image != cuda_image
    assert spec["blas_impl"] == ["mkl", "generic"]
    assert spec["megabuild"] == ["true"]
    # every value is a string, as conda-build reads config files
    assert all(isinstance(v, str) for key in ("python", "c_compiler_version") for v in spec[key])


def test_osx_arm64_is_cpu_generic_only(feedstock):
    spec = spec_for(feedstock, OSX_ARM64)
    assert spec["gpu_backend"] == ["cpu"]
    assert spec["blas_impl"] == ["generic"]   # MKL is x86_64 only
    assert spec["megabuild"] == ["false"]


def test_aarch64_is_generic_with_cpu_sbsa_and_tegra_cuda(feedstock):
    spec = spec_for(feedstock, AARCH64)
    assert spec["blas_impl"] == ["generic"]   # MKL is x86_64 only
    assert spec["megabuild"] == ["true"]
    columns = list(zip(spec["gpu_backend"], spec["cuda_compiler_version"], spec["arm_variant_type"],
                       spec["c_stdlib_version"]))
    # conda-forge's pinning: sbsa by default, tegra (Jetson Orin) on CUDA 12.9 only, glibc 2.34
    assert columns == [("cpu", "None", "sbsa", "2.17"), ("cuda", "12.9", "sbsa", "2.17"),
                       ("cuda", "13.0", "sbsa", "2.28"), ("cuda", "12.9", "tegra", "2.34")]
    assert ["arm_variant_type"] == [k for g in zip_groups(spec) for k in g if k == "arm_variant_type"]


def test_explode_moves_zipped_keys_together(feedstock):
    spec = spec_for(feedstock, LINUX64)
    variants = explode(spec)
    free = [k for k in spec if k not in {k for g in zip_groups(spec) for k in g}
            and isinstance(spec[k], list) and k not in ("zip_keys", "extend_keys", "ignore_build_only_deps", "ignore_version")]
    expected = 1
    for key in free:
        expected *= len(spec[key])
    for group in zip_groups(spec):
        expected *= len(spec[group[0]])
    assert len(variants) == expected
    pairs = {(v["gpu_backend"], v["cuda_compiler_version"], v["rocm_version"]) for v in variants}
    assert pairs == {("cpu", "None", "None"), ("cuda", "12.9", "None"), ("cuda", "13.0", "None"),
                     ("rocm", "None", spec["rocm_version"][3])}
    assert {"gpu_backend", "blas_impl", "python"} <= loop_keys(variants)


def test_megabuild_keeps_every_python_in_one_linux_job(feedstock):
    matrix = analyse_platform(feedstock, LINUX64)
    assert "python" in matrix.all_used            # pytorch (an output) uses it ...
    assert "python" not in matrix.top_level_loop_keys   # ... but jobs do not split on it
    assert {"gpu_backend", "blas_impl"} <= matrix.top_level_loop_keys
    jobs = platform_jobs(feedstock, matrix)
    assert len(jobs) == 8
    pythons = spec_for(feedstock, LINUX64)["python"]
    for job in jobs:
        assert job.config["python"] == sorted(pythons)
        assert len(job.config["docker_image"]) == 1
        assert job.name.startswith("linux_64_blas_impl")


def test_job_names_are_built_from_the_keys_that_differ(feedstock):
    jobs = platform_jobs(feedstock, analyse_platform(feedstock, LINUX64))
    for job in jobs:
        for key in ("blas_impl", "gpu_backend", "cuda_compiler_version"):
            assert f"{key}{job.config[key][0]}" in job.name
    # single-valued keys (blas_impl, rocm_version) do not appear in the aarch64 jobs' names
    names = sorted(job.name for job in platform_jobs(feedstock, analyse_platform(feedstock, AARCH64)))
    assert names == [
        "linux_aarch64_arm_variant_typesbsac_stdlib_version2.17cuda_compiler_version12.9gpu_backendcuda",
        "linux_aarch64_arm_variant_typesbsac_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpu",
        "linux_aarch64_arm_variant_typesbsac_stdlib_version2.28cuda_compiler_version13.0gpu_backendcuda",
        "linux_aarch64_arm_variant_typetegrac_stdlib_version2.34cuda_compiler_version12.9gpu_backendcuda"]


def test_skipped_platforms_give_no_jobs(feedstock):
    # the recipe skips osx-64 (skip: true), and conda-forge.yml disables it
    matrix = analyse_platform(feedstock, Platform("osx-64"))
    assert matrix.built == []
    assert platform_jobs(feedstock, matrix) == []


def test_platform_without_pins_fails_like_conda_build(feedstock):
    # pinning.yaml carries no Windows compilers; as in conda-build's validate_spec, a zipped key
    # without settings on a platform is an error for that platform, named in one line
    with pytest.raises(FeedstockError, match=r"zip_keys group .*c_compiler_version.* no values on win-64"):
        analyse_platform(feedstock, Platform("win-64"))


def test_used_variable_rules_match_conda_build(tmp_path):
    from feedstock.before_build.render.used_vars import used_in_shell_script, used_in_text

    keys = tuple(sorted(["cuda_compiler", "cuda_compiler_version", "c_stdlib", "c_stdlib_version",
                         "python", "blas_impl", "megabuild", "numpy", "use_magma"]))
    text = ("requirements:\n  build:\n    - {{ compiler('cuda') }}\n    - {{ stdlib('c') }}\n"
            "  host:\n    - python\n    - numpy >=2\n    - libblas * *{{ blas_impl }}\n")
    assert used_in_text(keys, text) == {"cuda_compiler", "cuda_compiler_version", "c_stdlib",
                                        "c_stdlib_version", "python", "blas_impl"}
    # "numpy >=2" is a pinned requirement, not the variant's numpy; selectors count on their own
    assert used_in_text(keys, "    - foo  # [megabuild and not use_magma]\n", selectors_only=True) == {
        "megabuild", "use_magma"}
    script = tmp_path / "build.sh"
    script.write_text('echo "${blas_impl}"\nif [ $megabuild = true ]; then :; fi\necho numpy\n')
    assert used_in_shell_script(keys, script) == {"blas_impl", "megabuild"}


def test_recipe_text_slices_the_way_conda_build_scans_them():
    from feedstock.before_build.render.recipe_text import output_text, requirements_text, top_level_with_output

    raw = ("package:\n  name: top\nrequirements:\n  build:\n    - cmake\n"
           "outputs:\n"
           "  - name: first\n    requirements:\n      host:\n        - python\n"
           "  - name: second  # [linux]\n    script: build.sh\n"
           "about:\n  license: BSD\n")
    first, second = output_text(raw, 0, None), output_text(raw, 1, None)
    assert first == "  - name: first\n    requirements:\n      host:\n        - python\n"
    assert second == "  - name: second  # [linux]\n    script: build.sh"       # ends at about:
    assert output_text(raw, 2, None) == ""
    assert requirements_text(first) == "requirements:\n      host:\n        - python\n"
    # the top-level view: everything but the outputs section, plus one output
    top = top_level_with_output(raw, 1, None)
    assert top.startswith("package:\n") and "name: first" not in top and top.endswith(second)
    assert requirements_text(top) == "requirements:\n  build:\n    - cmake\n\n"   # up to about:


@pytest.mark.parametrize("text, used", [
    ("{{ blas_impl }}", {"blas_impl"}),
    ("{{ pin_compatible('numpy', max_pin='x') }}", {"numpy"}),
    ("{% set tag = 'x' ~ blas_impl %}", {"blas_impl"}),
    ("{% for v in python %}{% endfor %}", {"python"}),
    ("{% if megabuild == 'true' %}", {"megabuild"}),
    ("{{ blas_implementation }}", set()),                 # another name that starts with the key
    ("  - use-magma", {"use_magma"}),                      # requirement names may use '-'
    ("  - numpy >=2", set()),                              # a pinned requirement is not the variant's
    ("    - {{ compiler('cuda') }}", {"cuda_compiler"}),
])
def test_used_in_text_cases(text, used):
    from feedstock.before_build.render.used_vars import used_in_text

    keys = ("blas_impl", "numpy", "python", "megabuild", "use_magma", "cuda_compiler")
    assert used_in_text(keys, text) == used


def test_shell_script_sees_the_first_dollar_of_each_line_only(tmp_path):
    # conda-build's scan: "$megabuild" after another "$" on the same line goes unnoticed
    from feedstock.before_build.render.used_vars import used_in_shell_script

    script = tmp_path / "build.sh"
    script.write_text('echo "${blas_impl}" $megabuild\n  $python -m x\n')
    assert used_in_shell_script(("blas_impl", "megabuild", "python"), script) == {"blas_impl", "python"}


def test_a_matrix_over_the_limit_is_refused_before_it_is_made():
    from common.input_files import MAX_VARIANTS

    assert len(explode({"a": list(range(MAX_VARIANTS))})) == MAX_VARIANTS
    with pytest.raises(FeedstockError) as err:
        explode({key: [str(v) for v in range(9)] for key in "abcdefghi"} | {"python": ["3.11"]})
    assert str(err.value) == (
        "the variant matrix would have 387,420,489 combinations (the limit is 2,048), from a (9 values) x "
        "b (9 values) x c (9 values) x d (9 values) x e (9 values) x f (9 values) x 3 more keys; remove "
        "values, or zip keys that change together (zip_keys)")
    # zipped keys are one axis
    assert len(explode({"a": list(range(2000)), "b": list(range(2000)), "zip_keys": [["a", "b"]]})) == 2000


@pytest.mark.parametrize("command", [("rerender", "--check"), ("lint",)])
def test_nine_unused_keys_of_nine_values_are_one_line_in_seconds(feedstock_copy, command):
    """Issue 35: 81 plain lines made rerender --check and lint run forever (9^9 variants)."""
    import time

    from tests.support.feedstock_cli import run_feedstock_cli

    config = feedstock_copy / "recipe" / "conda_build_config.yaml"
    before = config.read_text()
    config.write_text(before + "".join(f"unused_{k}:\n" + "".join(f"  - v{v}\n" for v in range(9))
                                       for k in range(9)))
    tree = {p: p.read_bytes() for p in feedstock_copy.rglob("*") if p.is_file()}
    started = time.monotonic()
    proc = run_feedstock_cli(*command, root=feedstock_copy)
    assert time.monotonic() - started < 60
    if command == ("lint",):   # lint reports what it could not render as a finding
        assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
        [line] = [line for line in proc.stdout.splitlines() if "combinations" in line]
    else:
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        [line] = proc.stderr.strip().splitlines()
        assert line.startswith("error: ")
    # the feedstock's own keys multiply it further
    assert " combinations (the limit is 2,048), from unused_" in line, line
    assert "unused_0 (9 values)" in line
    assert {p: p.read_bytes() for p in feedstock_copy.rglob("*") if p.is_file()} == tree
