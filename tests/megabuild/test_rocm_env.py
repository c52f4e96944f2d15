"""The ROCm part of the driver's environment (recipe/megabuild/rocm.py).

Decisions (where ROCm is, which flags) are checked on directory trees; the pitfalls are
checked on the real HIP compiler: Debian's hipcc (HIP 5.2) and its clang, with the HIP headers,
device libraries and LLVM OpenMP runtime of the Debian packages. A ROCm laid out as in AMD's
images (`/opt/rocm/{bin,include,llvm}`) is assembled from those real files with symlinks.
Without hipcc those tests skip and say how to install it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from megabuild import rocm
from megabuild.build_env import ROCM_ARCH_LISTS, build_environment, gpu_backend
from megabuild.errors import MegabuildError
from megabuild.versions import major_minor

ROCM = {"rocm_version": "7.2", "cuda_compiler_version": "None", "blas_impl": "generic",
        "target_platform": "linux-64", "CPU_COUNT": "2", "PKG_VERSION": "2.13.0"}
KERNEL = ("#include <hip/hip_runtime.h>\n#include <vector>\n"
          "__global__ void scale(float* x, float f) { x[threadIdx.x] *= f; }\n"
          "int host_side() { std::vector<int> v(3); return int(v.size()); }\n")
SHADOW = '#error "the conda prefix\'s hip_runtime.h shadowed ROCm\'s"\n'


def make_rocm_tree(root: Path, clang_in: str = "llvm/bin") -> Path:
    """The files the driver looks for, nothing else (it never runs them in these tests)."""
    (root / "include" / "hip").mkdir(parents=True)
    (root / "include" / "hip" / "hip_runtime.h").write_text("#pragma once\n")
    (root / clang_in).mkdir(parents=True)
    (root / clang_in / "clang++").write_text("")
    return root


@pytest.fixture
def rocm_tree(tmp_path: Path) -> Path:
    return make_rocm_tree(tmp_path / "rocm")


def env_for(base: dict, **variant: str) -> dict:
    return build_environment({**ROCM, **variant}, {"PATH": "/usr/bin:/bin", **base})


def one_line_error(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


# -- arch lists, versions, switches -------------------------------------------------------------
@pytest.mark.parametrize("version", sorted(ROCM_ARCH_LISTS))
def test_rocm_arch_list_per_version(rocm_tree: Path, version: str) -> None:
    env = env_for({"ROCM_PATH": str(rocm_tree)}, rocm_version=version)
    assert env["USE_ROCM"] == "1" and env["USE_CUDA"] == "0"
    assert env["PYTORCH_ROCM_ARCH"] == ROCM_ARCH_LISTS[version]
    assert re.fullmatch(r"(gfx[0-9a-f]+;)*gfx[0-9a-f]+", env["PYTORCH_ROCM_ARCH"])
    assert env["ROCM_PATH"] == str(rocm_tree) and env["HIP_PLATFORM"] == "amd"
    # every switch of the version table is set, and each one says why
    assert set(rocm.ROCM_SWITCHES[version]) == {"USE_MKLDNN", "USE_FBGEMM", "USE_FBGEMM_GENAI",
                                                "USE_KINETO"}
    for name, (value, why) in rocm.ROCM_SWITCHES[version].items():
        assert env[name] == value and len(why) > 40, name


def test_unknown_version_and_arch_override(rocm_tree: Path) -> None:
    with pytest.raises(MegabuildError, match="unknown ROCm version '5.7'") as info:
        env_for({"ROCM_PATH": str(rocm_tree)}, rocm_version="5.7")
    one_line_error(info)
    env = env_for({"FEEDSTOCK_ROCM_ARCH": "gfx942", "ROCM_PATH": str(rocm_tree)},
                  rocm_version="5.7")
    assert env["PYTORCH_ROCM_ARCH"] == "gfx942"
    assert gpu_backend({"gpu_backend": "rocm", "rocm_version": "6.4"}) == "rocm"


def test_arch_override_is_normalised_and_checked(rocm_tree: Path) -> None:
    base = {"ROCM_PATH": str(rocm_tree)}
    env = env_for({**base, "FEEDSTOCK_ROCM_ARCH": "gfx90a, gfx1030 gfx942:sramecc+:xnack-"})
    assert env["PYTORCH_ROCM_ARCH"] == "gfx90a;gfx1030;gfx942:sramecc+:xnack-"
    with pytest.raises(MegabuildError) as info:
        env_for({**base, "FEEDSTOCK_ROCM_ARCH": "gfx90a;gfx9999"})
    assert one_line_error(info).startswith("unknown gfx target 'gfx9999' in FEEDSTOCK_ROCM_ARCH: "
                                           "not supported by ROCm 7.2 (supported: gfx1030 ")
    with pytest.raises(MegabuildError, match="'gfx950' .* not supported by ROCm 6.4"):
        env_for({**base, "FEEDSTOCK_ROCM_ARCH": "gfx950"}, rocm_version="6.4")
    with pytest.raises(MegabuildError, match="'gfx90a:xnack' .*"):
        env_for({**base, "FEEDSTOCK_ROCM_ARCH": "gfx90a:xnack"})
    with pytest.raises(MegabuildError, match="FEEDSTOCK_ROCM_ARCH is empty"):
        rocm.validate_arch_list(" ; ", "7.2", "FEEDSTOCK_ROCM_ARCH")


def test_fbgemm_genai_only_for_mi300_class_targets(rocm_tree: Path) -> None:
    base = {"ROCM_PATH": str(rocm_tree)}
    assert env_for(base)["USE_FBGEMM_GENAI"] == "0"  # the full 7.2 list
    assert env_for({**base, "FEEDSTOCK_ROCM_ARCH": "gfx942;gfx950"})["USE_FBGEMM_GENAI"] == "1"
    assert env_for({**base, "FEEDSTOCK_ROCM_ARCH": "gfx942;gfx90a"})["USE_FBGEMM_GENAI"] == "0"


def test_every_rocm_version_of_the_recipe_has_switches(repo_root: Path) -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((repo_root / "recipe" / "conda_build_config.yaml").read_text())
    versions = {major_minor(str(v)) for v in config.get("rocm_version", [])} - {"None"}
    assert versions and versions <= set(rocm.ROCM_SWITCHES) <= set(ROCM_ARCH_LISTS)


# -- where ROCm is ------------------------------------------------------------------------------
def test_rocm_found_in_the_first_location_that_has_it(tmp_path: Path) -> None:
    empty, usr = tmp_path / "opt-rocm", make_rocm_tree(tmp_path / "usr", clang_in="bin")
    empty.mkdir()
    assert rocm.find_rocm({}, [str(empty), str(usr)]) == usr
    opt = make_rocm_tree(tmp_path / "opt")
    assert rocm.find_rocm({}, [str(opt), str(usr)]) == opt
    # the caller's ROCM_PATH wins over the search
    assert rocm.find_rocm({"ROCM_PATH": str(usr)}, [str(opt)]) == usr


def test_no_rocm_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(MegabuildError) as info:
        rocm.find_rocm({}, [str(tmp_path / "opt-rocm"), str(tmp_path / "usr")])
    message = one_line_error(info)
    assert message.startswith(f"no ROCm found: none of {tmp_path / 'opt-rocm'}, ")
    assert "set ROCM_PATH" in message
    with pytest.raises(MegabuildError) as info:
        env_for({"ROCM_PATH": str(tmp_path / "nowhere")})
    assert one_line_error(info).startswith(f"ROCM_PATH={tmp_path / 'nowhere'} is not a ROCm "
                                           "installation (no include/hip/hip_runtime.h there)")


def test_hip_clang_path_detected_and_overridable(tmp_path: Path) -> None:
    image = make_rocm_tree(tmp_path / "image")  # /opt/rocm/llvm/bin, as in AMD's images
    (image / "bin").mkdir()
    assert env_for({"ROCM_PATH": str(image)})["HIP_CLANG_PATH"] == str(image / "llvm" / "bin")
    distro = make_rocm_tree(tmp_path / "distro", clang_in="bin")  # /usr/bin/clang++-15
    (distro / "bin" / "clang++").rename(distro / "bin" / "clang++-15")
    assert env_for({"ROCM_PATH": str(distro)})["HIP_CLANG_PATH"] == str(distro / "bin")
    env = env_for({"ROCM_PATH": str(image), "HIP_CLANG_PATH": str(distro / "bin")})
    assert env["HIP_CLANG_PATH"] == str(distro / "bin")
    with pytest.raises(MegabuildError, match=r"HIP_CLANG_PATH=\S+ has no clang\+\+") as info:
        env_for({"ROCM_PATH": str(image), "HIP_CLANG_PATH": str(tmp_path)})
    one_line_error(info)
    (image / "llvm" / "bin" / "clang++").unlink()
    with pytest.raises(MegabuildError, match="no clang\\+\\+ for HIP in .*set HIP_CLANG_PATH"):
        env_for({"ROCM_PATH": str(image)})


def test_hip_platform_amd_and_nvidia_refused(rocm_tree: Path) -> None:
    base = {"ROCM_PATH": str(rocm_tree)}
    assert env_for(base)["HIP_PLATFORM"] == "amd"
    assert env_for({**base, "HIP_PLATFORM": "amd"})["HIP_PLATFORM"] == "amd"
    for value in ("nvidia", "nvcc"):
        with pytest.raises(MegabuildError) as info:
            env_for({**base, "HIP_PLATFORM": value})
        assert one_line_error(info) == (
            f"HIP_PLATFORM={value} is set, but this is a ROCm variant, which compiles for AMD "
            "GPUs; unset HIP_PLATFORM (the driver sets HIP_PLATFORM=amd)")
    cpu = build_environment({**ROCM, "rocm_version": "None"}, {"HIP_PLATFORM": "nvidia"})
    assert cpu["HIP_PLATFORM"] == "nvidia"  # not a ROCm variant: none of the driver's business


# -- search order and toolchain flags -----------------------------------------------------------
def test_rocm_searches_rocm_before_the_prefix(rocm_tree: Path) -> None:
    env = env_for({"ROCM_PATH": str(rocm_tree), "PREFIX": "/conda/prefix",
                   "CMAKE_PREFIX_PATH": "/extra",
                   "CXXFLAGS": "-O2 -isystem /conda/prefix/include -fPIC",
                   "CPPFLAGS": "-DNDEBUG -I/conda/prefix/include", "CFLAGS": "-O2"})
    assert env["CMAKE_PREFIX_PATH"] == f"{rocm_tree}:/conda/prefix:/extra"
    ours = f"-isystem {rocm_tree}/include"
    assert env["CXXFLAGS"] == f"-O2 {ours} -isystem /conda/prefix/include -fPIC"
    assert env["CPPFLAGS"] == f"-DNDEBUG {ours} -I/conda/prefix/include"
    assert env["CFLAGS"] == f"{ours} -O2"
    assert env["HIPCC_COMPILE_FLAGS_APPEND"] == f"{ours} -isystem /conda/prefix/include"
    assert env["HIPFLAGS"] == env["HIPCC_COMPILE_FLAGS_APPEND"]
    cpu = build_environment({**ROCM, "rocm_version": "None"}, {"CMAKE_PREFIX_PATH": "/extra"})
    assert cpu["CMAKE_PREFIX_PATH"] == "/extra" and "HIPFLAGS" not in cpu


def test_conda_gcc_toolchain_flag_follows_the_clang_version(tmp_path: Path) -> None:
    gcc = tmp_path / "build" / "lib" / "gcc" / "x86_64-conda-linux-gnu"
    for version in ("12.4.0", "13.3.0"):
        (gcc / version).mkdir(parents=True)
        (gcc / version / "crtbegin.o").write_bytes(b"")
    (gcc / "14.0.0").mkdir()  # no crtbegin.o: not a GCC installation
    base = {"BUILD_PREFIX": str(tmp_path / "build"), "HOST": "x86_64-conda-linux-gnu"}
    install_dir = rocm.conda_gcc_install_dir(base)
    assert install_dir == gcc / "13.3.0"
    assert rocm.gcc_toolchain_flags(install_dir, 19) == [f"--gcc-install-dir={gcc / '13.3.0'}"]
    assert rocm.gcc_toolchain_flags(install_dir, 15) == [f"--gcc-toolchain={tmp_path / 'build'}"]
    assert rocm.gcc_toolchain_flags(None, 19) == []
    assert rocm.conda_gcc_install_dir({"BUILD_PREFIX": str(tmp_path / "build")}) is None


# -- the real HIP compiler ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def hipcc() -> Path:
    path = shutil.which("hipcc")
    if path is None:
        pytest.skip("hipcc not found on PATH; these tests run the real HIP compiler (Debian/"
                    "Ubuntu: apt-get install hipcc libamdhip64-dev rocm-device-libs libomp-15-dev)")
    return Path(path)


@pytest.fixture(scope="module")
def distro_rocm(hipcc: Path) -> Path:
    """The distribution's ROCm (/usr for Debian's packages), as the driver finds it."""
    try:
        return rocm.find_rocm({})
    except MegabuildError as exc:
        pytest.skip(f"hipcc is installed but the driver finds no ROCm: {exc}")


@pytest.fixture(scope="module")
def image_rocm(distro_rocm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ROCm laid out as in AMD's images (/opt/rocm: bin/hipcc, include/, llvm/bin/clang++,
    lib/, amdgcn/bitcode), made of symlinks to the distribution's real files."""
    if distro_rocm != Path("/usr"):
        return distro_rocm  # a real /opt/rocm: use it as it is
    root = tmp_path_factory.mktemp("opt") / "rocm"
    debian_clang = sorted(Path("/usr/bin").glob("clang++-*"))
    bitcode = sorted(Path("/usr/lib").glob("*/amdgcn/bitcode"))
    if not debian_clang or not bitcode:
        pytest.skip("no clang++-<N> in /usr/bin or no amdgcn device libraries under /usr/lib "
                    "(apt-get install hipcc rocm-device-libs)")
    clang = Path(os.path.realpath(debian_clang[0]))
    links = {"bin/hipcc": "/usr/bin/hipcc", "bin/hipcc.pl": "/usr/bin/hipcc.pl",
             "bin/hipvars.pm": "/usr/bin/hipvars.pm", "include/hip": "/usr/include/hip",
             "include/hsa": "/usr/include/hsa", "amdgcn/bitcode": str(bitcode[0]),
             # Debian's hipcc.pl runs $HIP_CLANG_PATH/clang++-<N>
             "llvm/bin/clang++": str(clang), f"llvm/bin/{debian_clang[0].name}": str(clang),
             "llvm/lib/clang": str(clang.parent.parent / "lib" / "clang")}
    for lib in ("libamdhip64.so", "libhsa-runtime64.so"):
        found = sorted(Path("/usr/lib").glob(f"*/{lib}"))
        if found:
            links[f"lib/{lib}"] = str(found[0])
    for name, target in links.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if not (root / name).exists():
            (root / name).symlink_to(target)
    return root


def test_rocm_under_usr_is_not_moved_ahead_of_the_system(distro_rocm: Path) -> None:
    """Debian's ROCm headers are in /usr/include, the system directory itself: putting it in
    front (-isystem /usr/include) would break libstdc++'s #include_next, so nothing moves."""
    if distro_rocm != Path("/usr"):
        pytest.skip(f"this machine's ROCm is {distro_rocm}, not the distribution's /usr")
    env = env_for({"ROCM_PATH": "/usr", "PREFIX": "/p", "CXXFLAGS": "-O2 -isystem /p/include"})
    assert env["CXXFLAGS"] == "-O2 -isystem /p/include"
    assert env["HIPCC_COMPILE_FLAGS_APPEND"].split()[:2] == ["-isystem", "/p/include"]
    assert "/usr/include" not in env["HIPCC_COMPILE_FLAGS_APPEND"]


def run_hipcc(hipcc_path: Path, args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    # TMPDIR: HIP's clang leaves an empty <source>-XXXXXX folder in the temp dir per compile
    return subprocess.run([str(hipcc_path), *args], env={**env, "HIPCC_VERBOSE": "1", "TMPDIR": str(cwd)},
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def search_list(output: str) -> list[str]:
    """The first `#include <...>` search list that clang -v printed."""
    lines = output.splitlines()
    start = lines.index("#include <...> search starts here:") + 1
    end = lines.index("End of search list.", start)
    return [os.path.normpath(line.strip()) for line in lines[start:end]]


@pytest.mark.compile
def test_include_order_on_the_real_hipcc_command_line(image_rocm: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "include" / "hip").mkdir(parents=True)
    # a conda package's header of the same name (e.g. an older HIP) must not win
    (prefix / "include" / "hip" / "hip_runtime.h").write_text(SHADOW)
    (tmp_path / "k.hip").write_text(KERNEL)
    env = env_for({"ROCM_PATH": str(image_rocm), "PREFIX": str(prefix),
                   "CXXFLAGS": f"-O2 -isystem {prefix}/include"})
    assert env["HIP_CLANG_PATH"] == str(image_rocm / "llvm" / "bin")
    # CMake passes the prefix as -I (conda's packages are found there)
    args = ["-v", f"-I{prefix}/include", "-c", "k.hip", "--offload-arch=gfx90a", "-o", "k.o"]
    proc = run_hipcc(image_rocm / "bin" / "hipcc", args, env, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    command = next(l for l in proc.stdout.splitlines() if l.startswith("hipcc-cmd:"))
    assert command.index(f"-isystem {image_rocm}/include -isystem {prefix}/include") < \
        command.index(f"-I{prefix}/include")
    order = search_list(proc.stderr)
    rocm_at, prefix_at = order.index(str(image_rocm / "include")), order.index(str(prefix / "include"))
    assert rocm_at < prefix_at < order.index("/usr/include"), order

    # the pitfall itself, without the driver's flags: the prefix comes first and shadows ROCm
    plain = {k: v for k, v in env.items() if k not in ("HIPCC_COMPILE_FLAGS_APPEND", "HIPFLAGS")}
    proc = run_hipcc(image_rocm / "bin" / "hipcc", args, plain, tmp_path)
    assert proc.returncode != 0 and "shadowed ROCm" in proc.stderr
    order = search_list(proc.stderr)
    assert order.index(str(prefix / "include")) < order.index(str(image_rocm / "include"))


def test_hip_platform_amd_makes_hipcc_use_clang(distro_rocm: Path, hipcc: Path,
                                                tmp_path: Path) -> None:
    env = env_for({"PATH": os.environ["PATH"]})
    proc = run_hipcc(hipcc, ["--version"], env, tmp_path)
    assert proc.returncode == 0 and "clang version" in proc.stdout and "nvcc" not in proc.stdout
    if shutil.which("nvcc") is not None:  # the pitfall: with CUDA installed, hipcc picks nvcc
        plain = {k: v for k, v in env.items() if k != "HIP_PLATFORM"}
        assert "nvcc" in run_hipcc(hipcc, ["--version"], plain, tmp_path).stdout


@pytest.mark.compile
def test_hipcc_clang_uses_the_conda_gcc(distro_rocm: Path, hipcc: Path, tmp_path: Path) -> None:
    """$BUILD_PREFIX/lib/gcc/<triple>/<version>, as conda's compiler packages lay it out; here
    it links to this machine's GCC, under a triple this clang knows."""
    libgcc = subprocess.run(["g++", "-print-libgcc-file-name"], capture_output=True, text=True)
    gcc_dir = Path(libgcc.stdout.strip()).parent
    if libgcc.returncode != 0 or not (gcc_dir / "crtbegin.o").is_file():
        pytest.skip("g++ reports no GCC installation directory")
    build = tmp_path / "build-prefix"
    triple, version = gcc_dir.parent.name, gcc_dir.name
    (build / "lib" / "gcc" / triple).mkdir(parents=True)
    (build / "lib" / "gcc" / triple / version).symlink_to(gcc_dir)
    env = env_for({"PATH": os.environ["PATH"], "BUILD_PREFIX": str(build), "HOST": triple})
    flag = rocm.gcc_toolchain_flags(build / "lib" / "gcc" / triple / version,
                                    rocm.clang_major(Path(env["HIP_CLANG_PATH"])))[0]
    assert flag in env["HIPCC_COMPILE_FLAGS_APPEND"].split()
    assert flag in env["HIPCC_LINK_FLAGS_APPEND"].split()
    (tmp_path / "k.hip").write_text(KERNEL)
    args = ["-v", "-c", "k.hip", "--offload-arch=gfx90a", "-o", "k.o"]
    proc = run_hipcc(hipcc, args, env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    selected = re.findall(r"^Selected GCC installation: (.*)$", proc.stderr, re.MULTILINE)
    assert selected and {os.path.normpath(s) for s in selected} == {
        str(build / "lib" / "gcc" / triple / version)}
    plain = {k: v for k, v in env.items() if not k.startswith("HIPCC_")}
    proc = run_hipcc(hipcc, args, plain, tmp_path)
    selected = re.findall(r"^Selected GCC installation: (.*)$", proc.stderr, re.MULTILINE)
    assert selected and str(build) not in selected[0]  # without the flag: the system's GCC


@pytest.mark.compile
def test_openmp_comes_from_rocms_llvm(distro_rocm: Path, hipcc: Path, tmp_path: Path) -> None:
    """A conda prefix with its own libomp (llvm-openmp) on -L and in the rpath, as conda's
    LDFLAGS put it: the program must still link and load the libomp of ROCm's LLVM."""
    env = env_for({"PATH": os.environ["PATH"]})
    omp_dir = rocm.openmp_lib_dir(Path(env["HIP_CLANG_PATH"]))
    if omp_dir is None:
        pytest.skip("the LLVM of this ROCm has no libomp.so (Debian: apt-get install libomp-15-dev)")
    assert env["CMAKE_PREFIX_PATH"].split(":")[:2] == [env["ROCM_PATH"], str(omp_dir.parent)]
    prefix_lib = tmp_path / "prefix" / "lib"
    prefix_lib.mkdir(parents=True)
    real = Path(os.path.realpath(omp_dir / "libomp.so"))
    shutil.copy2(real, prefix_lib / real.name)
    soname = re.search(r"SONAME.*\[(.*)\]", subprocess.run(
        ["readelf", "-d", str(real)], capture_output=True, text=True).stdout)
    if soname and soname.group(1) != real.name:
        (prefix_lib / soname.group(1)).symlink_to(real.name)
    (prefix_lib / "libomp.so").symlink_to(real.name)
    (tmp_path / "omp.cpp").write_text(
        "#include <omp.h>\n#include <cstdio>\nint main() { int n = 0;\n"
        "#pragma omp parallel reduction(+:n)\n n += 1;\n std::printf(\"%d\\n\", n); }\n")
    args = ["-fopenmp", "omp.cpp", "--offload-arch=gfx90a", "-o", "omp",
            f"-L{prefix_lib}", f"-Wl,-rpath,{prefix_lib}"]

    def loaded_libomp(environ: dict) -> str:
        proc = run_hipcc(hipcc, args, environ, tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        ldd = subprocess.run(["ldd", str(tmp_path / "omp")], capture_output=True, text=True)
        return next(l for l in ldd.stdout.splitlines() if "libomp" in l).split("=>")[1].split()[0]

    assert Path(loaded_libomp(env)).parent == omp_dir
    run = subprocess.run([str(tmp_path / "omp")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and int(run.stdout) >= 1
    plain = {k: v for k, v in env.items() if k != "HIPCC_LINK_FLAGS_APPEND"}
    assert Path(loaded_libomp(plain)).parent == prefix_lib  # the pitfall without the driver


# -- the driver's command line ------------------------------------------------------------------
@pytest.mark.parametrize("extra, message", [
    ({"HIP_PLATFORM": "nvidia"}, "error: HIP_PLATFORM=nvidia is set, but this is a ROCm variant"),
    ({"FEEDSTOCK_ROCM_ARCH": "gfx90a;gfx9999"}, "error: unknown gfx target 'gfx9999' in "
                                                "FEEDSTOCK_ROCM_ARCH: not supported by ROCm 7.2"),
    ({"ROCM_PATH": "/nonexistent/rocm"}, "error: ROCM_PATH=/nonexistent/rocm is not a ROCm "
                                         "installation"),
])
def test_command_line_bad_input_is_one_line(tmp_path: Path, repo_root: Path, rocm_tree: Path,
                                            extra: dict, message: str) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(repo_root / "recipe"),
           "SRC_DIR": str(tmp_path), "PREFIX": str(tmp_path / "prefix"), "PYTHON": sys.executable,
           "PKG_NAME": "libtorch-split", "rocm_version": "7.2", "cuda_compiler_version": "None",
           "ROCM_PATH": str(rocm_tree), **extra}
    proc = subprocess.run([sys.executable, "-m", "megabuild"], env=env, capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 1
    lines = [l for l in proc.stderr.strip().splitlines() if not l.startswith("[megabuild]")]
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rocm"]  # nothing written
