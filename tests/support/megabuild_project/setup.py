"""A miniature of PyTorch's setup.py, for the megabuild driver's tests.

Like PyTorch's: CMake (Ninja) is configured only when build/CMakeCache.txt is missing; every
`USE_*`, `BUILD_*` and `CMAKE_*` environment variable becomes a -D definition at that moment
(and never again: afterwards only the cache counts); the build installs into ./torch, and
setuptools copies torch/{bin,lib,include,share} and the extension into build/lib.*/torch.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
BUILD_DIR = ROOT / "build"
CACHE = BUILD_DIR / "CMakeCache.txt"
PASSED_THROUGH = ("USE_", "BUILD_", "CMAKE_", "MEGATEST_")
NOT_DEFINES = {"CMAKE_GENERATOR", "CMAKE_PREFIX_PATH", "CMAKE_BUILD_PARALLEL_LEVEL"}


def configure_args():
    defines = {k: v for k, v in os.environ.items()
               if k.startswith(PASSED_THROUGH) and k not in NOT_DEFINES}
    if os.environ.get("BLAS"):  # as PyTorch's setup.py: BLAS reaches CMake as -DBLAS=
        defines["BLAS"] = os.environ["BLAS"]
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        defines["TORCH_CUDA_ARCH_LIST"] = os.environ["TORCH_CUDA_ARCH_LIST"]
    prefix_path = [sysconfig.get_path("purelib")] + [
        p for p in os.environ.get("CMAKE_PREFIX_PATH", "").split(os.pathsep) if p]
    defines.update({
        "Python_EXECUTABLE": sys.executable,
        "CMAKE_PREFIX_PATH": ";".join(prefix_path),
        "CMAKE_INSTALL_PREFIX": str(ROOT / "torch"),
        "CMAKE_BUILD_TYPE": "Release",
    })
    return ["-G", "Ninja", "-S", str(ROOT), "-B", str(BUILD_DIR)] + [
        f"-D{k}={v}" for k, v in sorted(defines.items())]


def check_submodules():
    """As PyTorch's setup.py: with a .gitmodules, every submodule must be a git checkout.

    A release tarball has the submodules' files but no git metadata, so this fails unless
    the driver removed .gitmodules first.
    """
    listing = ROOT / ".gitmodules"
    if not listing.exists():
        return
    for line in listing.read_text().splitlines():
        if line.strip().startswith("path ="):
            path = ROOT / line.split("=", 1)[1].strip()
            if not (path / ".git").exists():
                sys.exit(f"Could not find submodule {path.name}: not a git checkout "
                         "(run git submodule update --init --recursive)")


def configure():
    check_submodules()
    if not CACHE.exists():
        subprocess.check_call(["cmake"] + configure_args())


def build_deps():
    configure()
    jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))
    subprocess.check_call(["cmake", "--build", str(BUILD_DIR), "--target", "install", "-j", jobs])


class BuildWithCMake(build):
    def run(self):
        build_deps()
        super().run()


class CopyCMakeExtension(build_ext):
    """The extension is built by CMake into ./torch; copy the one for this Python."""

    def build_extension(self, ext):
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = ROOT / "torch" / f"_C{suffix}"
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)


if "--cmake-only" in sys.argv:  # as in PyTorch: configure (if needed) and stop
    configure()
    sys.exit(0)

def package_version() -> str:
    """As PyTorch's setup.py: PYTORCH_BUILD_VERSION, plus .post<N> for a build number above 1."""
    version = os.environ.get("PYTORCH_BUILD_VERSION", "0.1.0")
    number = int(os.environ.get("PYTORCH_BUILD_NUMBER", "0") or 0)
    return f"{version}.post{number}" if number > 1 else version


setup(
    name="megatorch",
    version=package_version(),
    packages=["torch", "torchgen", "torchgen.packaged"],
    package_data={
        "torch": ["lib/*", "bin/*", "include/**/*", "share/**/*"],
        # broad, like PyTorch's globs: whatever the build left there gets packaged
        "torchgen": ["packaged/**/*"],
    },
    ext_modules=[Extension("torch._C", sources=[])],
    cmdclass={"build": BuildWithCMake, "build_ext": CopyCMakeExtension},
    zip_safe=False,
)
