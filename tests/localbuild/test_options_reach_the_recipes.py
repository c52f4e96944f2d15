"""Each developer option of build-locally.py reaches every build script of the recipe the chosen
tool reads: the variables the option puts into the build's environment (read off the dry run's
plan) are in the rendered script_env of every building part of meta.yaml, as conda-build reads
it (the default tool), and in every build script of recipe.yaml (rattler-build). The real
rattler-build run that checks the values arrive is tests/realbuild (the driver's settings line)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from feedstock.before_build.checks.override_variables import meta_build_scripts, v1_passthrough
from feedstock.before_build.render.outputs import job_variants, load_ci_config
from feedstock.before_build.render.recipe_render import read_recipe, render_recipe_text
from feedstock.before_build.render.variants import smithy_environ
from feedstock.layout import Platform, load_feedstock
from feedstock.text_input import load_yaml
from tests.support.paths import REPO_ROOT

CUDA = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_version12.9gpu_backendcudarocm_versionNone"
ROCM = "linux_64_blas_implgenericc_stdlib_version2.28cuda_compiler_versionNonegpu_backendrocmrocm_version7.2"
# option -> (its arguments, the config, the variables it must set)
OPTIONS = {
    "--jobs": (["--jobs", "3"], CUDA, {"FEEDSTOCK_MAX_JOBS": "3"}),
    "--heavy-jobs": (["--heavy-jobs", "1"], CUDA, {"FEEDSTOCK_HEAVY_JOBS": "1"}),
    "--cuda-arch": (["--cuda-arch", "9.0"], CUDA, {"FEEDSTOCK_CUDA_ARCH_LIST": "9.0", "FEEDSTOCK_DEV_TAG": "sm90"}),
    "--rocm-arch": (["--rocm-arch", "gfx90a"], ROCM, {"FEEDSTOCK_ROCM_ARCH": "gfx90a", "FEEDSTOCK_DEV_TAG": "gfx90a"}),
    "--dev-tag": (["--dev-tag", "mine"], CUDA, {"FEEDSTOCK_DEV_TAG": "mine"}),
    "--compile-cache": (["--compile-cache", "redis://127.0.0.1:6379"], CUDA,
                        {"FEEDSTOCK_COMPILE_CACHE": "redis://127.0.0.1:6379"}),
    "--compile-cache-read-only": (["--compile-cache", "redis://127.0.0.1:6379", "--compile-cache-read-only"], CUDA,
                                  {"FEEDSTOCK_COMPILE_CACHE_READ_ONLY": None}),
}


def _plan_environment(args: list[str], config: str) -> dict[str, str]:
    """The `environment:` block of `build-locally.py --dry-run` (the container's -e list)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEEDSTOCK_")}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "build-locally.py"), "--dry-run", "--engine", "docker",
                           *args, config], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    start = lines.index("environment:") + 1
    block = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        block.append(line.strip())
    return dict(line.split("=", 1) for line in block)


@pytest.fixture(scope="module")
def meta_scripts() -> dict[str, dict[str, set[str]]]:
    """config -> who runs a build script -> the names conda-build passes it (every variant)."""
    feedstock = load_feedstock(REPO_ROOT)
    raw = read_recipe(feedstock.recipe_dir)
    found: dict[str, dict[str, set[str]]] = {}
    for config in (CUDA, ROCM):
        platform = Platform("linux-64")
        environ = smithy_environ(feedstock, platform, raw)
        scripts: dict[str, set[str]] = {}
        for variant in job_variants(feedstock, load_ci_config(REPO_ROOT / ".ci_support" / f"{config}.yaml"), platform):
            render = render_recipe_text(raw, platform, variant, feedstock.recipe_dir, environ=environ)
            for who, names in meta_build_scripts(render):
                scripts[who] = scripts.get(who, set(names)) & set(names)
        found[config] = scripts
    return found


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_the_option_reaches_every_build_script_of_both_recipes(option, meta_scripts):
    args, config, expected = OPTIONS[option]
    environment = _plan_environment(args, config)
    for name, value in expected.items():
        assert name in environment, (option, environment)
        if value is not None:
            assert environment[name] == value, (option, name, environment[name])
    scripts = meta_scripts[config]
    assert "the top level (libtorch-split)" in scripts and "output 'pytorch'" in scripts
    passed = v1_passthrough(load_yaml((REPO_ROOT / "recipe" / "recipe.yaml").read_text(), "recipe.yaml", strings=True))
    assert {"libtorch-split", "libtorch", "pytorch"} <= set(passed)
    for name in expected:
        lacking = sorted(who for who, names in scripts.items() if name not in names)
        assert not lacking, f"{option}: conda-build would not pass {name} to {lacking}"
        lacking = sorted(who for who, names in passed.items() if name not in names)
        assert not lacking, f"{option}: rattler-build would not pass {name} to {lacking}"


def test_the_password_is_passed_by_name_to_every_build_script(meta_scripts):
    """--compile-cache's password never goes on a command line: `-e NAME` takes it from the
    caller's environment; both recipes hand it on (recipe.yaml as a secret)."""
    env = {**os.environ, "FEEDSTOCK_COMPILE_CACHE_PASSWORD": "s3cret"}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "build-locally.py"), "--dry-run", "--engine", "docker",
                           "--compile-cache", "redis://127.0.0.1:6379", CUDA], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout and "-e FEEDSTOCK_COMPILE_CACHE_PASSWORD " in proc.stdout
    assert all("FEEDSTOCK_COMPILE_CACHE_PASSWORD" in names for names in meta_scripts[CUDA].values())
    recipe = load_yaml((REPO_ROOT / "recipe" / "recipe.yaml").read_text(), "recipe.yaml", strings=True)
    assert all("FEEDSTOCK_COMPILE_CACHE_PASSWORD" in names for names in v1_passthrough(recipe).values())
