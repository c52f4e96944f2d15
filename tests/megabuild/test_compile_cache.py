"""The shared compile cache for real: ccache with a real Redis server on 127.0.0.1.

"Machine A" builds tests/support/megabuild_project through the driver's steps and fills an empty Redis;
"machine B" builds the same variant in another folder (other absolute paths) and must compile
nothing itself; a sibling variant that differs only in BLAS recompiles exactly the BLAS units.
Every count comes from ccache's own stats log, read by the driver (compile_cache.reports).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.support import megabuild_harness as harness
from tests.support import redis_server as redis_harness
from megabuild import compile_cache
from megabuild.build_env import build_environment
from megabuild.errors import MegabuildError

pytestmark = [pytest.mark.compile, pytest.mark.download]

# the units whose compile flags carry the BLAS choice (MEGATEST_BLAS_<flavour>)
BLAS_UNITS = {"aten/Ops.cpp", "linalg/BatchLinearAlgebraLib.cpp"}


def _require_ccache() -> None:
    if shutil.which("ccache") is None:
        pytest.skip("ccache not found (Debian package ccache)")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory):
    _require_ccache()
    try:
        with redis_harness.redis_server(tmp_path_factory.mktemp("redis")) as url:
            yield url
    except redis_harness.RedisUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def venvs(cpythons: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One Python is enough here: the split step plus one pytorch step."""
    version = "3.12" if "3.12" in cpythons else sorted(cpythons)[-1]
    try:
        harness.check_tools()
        return harness.make_venvs({version: cpythons[version]},
                                  tmp_path_factory.mktemp("cache-venvs"))
    except harness.HarnessUnavailable as exc:
        pytest.skip(str(exc))


def cached_build(venvs, root: Path, url: str, blas: str = "generic", gpu: bool = True):
    """A megabuild under root whose driver uses the cache at url; returns (run, step reports)."""
    first = len(compile_cache.reports)
    env = {compile_cache.CACHE_VARIABLE: url,
           # conda-build sets these; their common parent becomes ccache's base_dir
           "SRC_DIR": str(root / "src"), "PREFIX": str(root / "prefix")}
    run = harness.run_megabuild(venvs, root, gpu=gpu, blas=blas, extra_env=env, record=False)
    return run, [stats for _, stats in compile_cache.reports[first:]]


def total(reports, field: str) -> int:
    return sum(getattr(stats, field) for stats in reports)


def unit(source: str) -> str:
    """A source path relative to the project root, whatever folder it was built in."""
    parts = Path(source).parts       # absolute, or relative to the build folder (base_dir)
    if "src" in parts:
        parts = parts[parts.index("src") + 1:]
    return "/".join(p for p in parts if p != "..")


@pytest.fixture(scope="module")
def machine_a(venvs, redis_url, tmp_path_factory):
    return cached_build(venvs, tmp_path_factory.mktemp("machine-a") / "work", redis_url)


def test_machine_b_compiles_nothing(venvs, redis_url, machine_a, tmp_path_factory):
    run_a, reports_a = machine_a
    assert total(reports_a, "misses") >= 12                       # A compiled the project
    assert redis_harness.key_count(redis_url) > 0                 # ... into Redis
    sources = {unit(s) for r in reports_a for s in r.misses_by_source}
    assert {"torch/csrc/stub.c", "aten/Tensor.cpp"} <= sources     # C and C++
    if "MEGATEST_HAVE_CUDA_KERNEL:INTERNAL=ON" in (run_a.src / "build" / "CMakeCache.txt").read_text():
        assert "cuda/Kernels.cu" in sources                        # nvcc went through ccache too

    # machine B: another absolute path, deeper, fresh source copy and build folder
    other = tmp_path_factory.mktemp("machine-b") / "elsewhere" / "deeper" / "work"
    run_b, reports_b = cached_build(venvs, other, redis_url)
    assert str(run_b.src) != str(run_a.src)
    cacheable_a = total(reports_a, "hits") + total(reports_a, "misses")
    assert total(reports_b, "misses") == 0, [s for r in reports_b for s in r.misses_by_source]
    assert total(reports_b, "hits") == cacheable_a
    assert total(reports_b, "remote_hits") == cacheable_a          # all from Redis, none local
    assert total(reports_b, "remote_errors") == 0
    assert (run_b.stage / "libtorch" / "lib").is_dir()              # and the build finished


def test_blas_sibling_recompiles_exactly_the_blas_units(venvs, redis_url, machine_a,
                                                       tmp_path_factory):
    root = tmp_path_factory.mktemp("blas-sibling") / "work"
    _, reports = cached_build(venvs, root, redis_url, blas="mkl")
    compiled = Counter(unit(s) for r in reports for s in r.misses_by_source)
    # Ops.cpp once; the linear-algebra library twice (nomagma, then the USE_MAGMA flip)
    assert compiled == Counter({"aten/Ops.cpp": 1, "linalg/BatchLinearAlgebraLib.cpp": 2})
    assert set(compiled) == BLAS_UNITS
    assert total(reports, "hits") > 10


def test_unreachable_redis_is_one_warning_and_an_uncached_build(venvs, tmp_path, capfd):
    _require_ccache()
    dead = f"redis://127.0.0.1:{redis_harness.free_port()}"      # nothing listens there
    run, reports = cached_build(venvs, tmp_path / "work", dead, gpu=False)
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "compile cache" in line and "warning" in line]
    assert len(warnings) == 1, warnings
    assert dead in warnings[0] and "building without it" in warnings[0]
    assert reports == []                                           # no cache: no statistics
    assert "ccache" not in (run.src / "build" / "CMakeCache.txt").read_text().split(
        "CMAKE_CXX_COMPILER_LAUNCHER", 1)[-1].split("\n", 1)[0]
    assert (run.stage / "libtorch" / "lib").is_dir()


def test_wrong_password_is_a_warning_and_no_cache(tmp_path, capfd):
    _require_ccache()
    try:
        with redis_harness.redis_server(tmp_path / "redis", password="right-pw") as url:
            env = build_environment({"target_platform": "linux-64"},
                                    {"PATH": "/usr/bin:/bin", "CPU_COUNT": "1",
                                     compile_cache.CACHE_VARIABLE: url,
                                     compile_cache.PASSWORD_VARIABLE: "wrong-pw"})
            good = build_environment({"target_platform": "linux-64"},
                                     {"PATH": "/usr/bin:/bin", "CPU_COUNT": "1",
                                      compile_cache.CACHE_VARIABLE: url,
                                      compile_cache.PASSWORD_VARIABLE: "right-pw"})
    except redis_harness.RedisUnavailable as exc:
        pytest.skip(str(exc))
    err = capfd.readouterr().err
    assert "CMAKE_CXX_COMPILER_LAUNCHER" not in env
    assert err.count("is not reachable") == 1 and "check FEEDSTOCK_COMPILE_CACHE_PASSWORD" in err
    assert good["CMAKE_CXX_COMPILER_LAUNCHER"] == shutil.which("ccache")
    # the password reaches ccache through its environment only, never a log line
    assert good["CCACHE_REMOTE_STORAGE"] == url.replace("redis://", "redis://:right-pw@")
    assert "right-pw" not in err and "wrong-pw" not in err


@pytest.mark.parametrize("value, message", [
    ("redis://user:pw@cache:6379", "set FEEDSTOCK_COMPILE_CACHE_PASSWORD instead"),
    ("s3://bucket/prefix", "unsupported scheme 's3'"),
    ("relative/dir", "give an absolute folder"),
    ("redis://cache:port", "the port is not a number"),
])
def test_bad_cache_settings_are_one_line_errors(value, message):
    with pytest.raises(MegabuildError, match=message) as info:
        compile_cache.parse_setting(value)
    assert "\n" not in str(info.value)


def test_settings_for_folders_read_only_and_paths(tmp_path):
    _require_ccache()
    base = {"PATH": "/usr/bin:/bin", "CPU_COUNT": "1",
            "SRC_DIR": "/croot/libtorch-split_1732/work",
            "PREFIX": "/croot/libtorch-split_1732/_h_env_placehold",
            "BUILD_PREFIX": "/croot/libtorch-split_1732/_build_env",
            compile_cache.CACHE_VARIABLE: str(tmp_path / "shared"),
            compile_cache.READ_ONLY_VARIABLE: "1"}
    env = build_environment({"target_platform": "linux-64"}, base)
    assert env["CCACHE_DIR"] == str(tmp_path / "shared") and env["CCACHE_READONLY"] == "1"
    assert env["CCACHE_BASEDIR"] == "/croot/libtorch-split_1732"    # conda-build's build folder
    assert env["CCACHE_NOHASHDIR"] == "1" and env["CCACHE_COMPILERCHECK"] == "content"
    assert {env[f"CMAKE_{lang}_COMPILER_LAUNCHER"] for lang in ("C", "CXX", "CUDA", "HIP")} == \
        {shutil.which("ccache")}
    remote = compile_cache.parse_setting("redis://cache.example.org:6380/2", read_only=True)
    assert remote.remote and remote.host_port == ("cache.example.org", 6380)
    # the same environment for every step (a changed variable would rebuild everything)
    steps = [build_environment({"target_platform": "linux-64", "PKG_NAME": name}, base)
             for name in ("libtorch-split", "pytorch")]
    assert steps[0] == steps[1]


def test_hip_compiles_are_cached_too(tmp_path):
    """ROCm: Debian's hipcc through the launcher the driver sets; the second compile, in another
    folder below another build root, is a hit."""
    _require_ccache()
    if shutil.which("hipcc") is None:
        pytest.skip("hipcc not found (Debian packages hipcc libamdhip64-dev rocm-device-libs)")
    kernel = "#include <hip/hip_runtime.h>\n__global__ void add(float* a) { a[threadIdx.x] += 1; }\n"
    hits = []
    for machine in ("a", "b/deeper"):
        root = tmp_path / machine / "build-root"
        (root / "work").mkdir(parents=True)
        (root / "work" / "kernel.hip").write_text(kernel)
        env = build_environment({"target_platform": "linux-64"}, {
            "PATH": os.environ["PATH"], "CPU_COUNT": "1", "HOME": str(tmp_path),
            "SRC_DIR": str(root / "work"), "PREFIX": str(root / "prefix"),
            compile_cache.CACHE_VARIABLE: str(tmp_path / "cache")})
        env["HIP_PLATFORM"] = "amd"       # with CUDA installed hipcc would otherwise pick nvcc
        env["TMPDIR"] = str(tmp_path)     # HIP's clang leaves an empty folder there per compile
        with compile_cache.step_statistics(env, f"hip {machine}"):
            proc = subprocess.run([env["CMAKE_HIP_COMPILER_LAUNCHER"], "hipcc",
                                   "--offload-arch=gfx90a", "-c", "kernel.hip", "-o", "kernel.o"],
                                  cwd=root / "work", env=env, capture_output=True, text=True,
                                  timeout=300)
        assert proc.returncode == 0, proc.stderr[-500:]
        hits.append(compile_cache.reports[-1][1])
    assert (hits[0].misses, hits[0].hits) == (1, 0)
    assert (hits[1].misses, hits[1].hits) == (0, 1)
