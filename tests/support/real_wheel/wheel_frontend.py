"""A driver Frontend whose "build" unpacks the real PyTorch wheel instead of compiling PyTorch.

It implements the driver's Frontend protocol (recipe/megabuild/frontend.py) so that the layout
test runs the driver's real split, libtorch and pytorch steps; only the compiler is left out.
What the compiler would have done differently from the upstream wheel build is reproduced where
it shapes the layout: the recipe's source patches are applied to the files the wheel carries,
and with USE_SYSTEM_PYBIND11 (set by the driver) torch/include has no vendored pybind11.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError
from tests.support.paths import REPO_ROOT
from tests.support.real_wheel.build_cache import Interpreter, fixture_for, read_cache, write_build_cache
from tests.support.real_wheel.cuda_wheel import (drop_nvidia_rpath, drop_wheel_rpaths, links_magma, source_build_metadata,
                                                 wheel_cuda_version)

LINALG = "libtorch_cuda_linalg.so"

# The Python entries a retargeted cache must carry for the interpreter setup.py will build for
# (FindPython's record of the interpreter is dropped: CMake writes it again at configure).
RETARGETED_KEYS = ("Python_EXECUTABLE", "PYBIND11_PYTHON_EXECUTABLE_LAST",
                   "PYTHON_MODULE_EXTENSION", "_Python_INCLUDE_DIR")


def recipe_patches(meta_yaml: Path) -> list[Path]:
    """The patches meta.yaml's source section lists, in order."""
    names = re.findall(r"^\s*-\s*(patches/\S+\.patch)\s*(?:#.*)?$", meta_yaml.read_text(), re.MULTILINE)
    return [meta_yaml.parent / name for name in names]


def patch_targets(patch: Path) -> list[str]:
    return re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), re.MULTILINE)


# PyTorch installs these source folders' headers under torch/include/ (the wheel's layout)
_INSTALLED_HEADER_DIRS = ("torch/csrc/", "c10/")


def wheel_path(source_path: str) -> str:
    """Where the wheel carries a file of the source tree (headers are installed under
    torch/include/; Python files keep their path)."""
    if source_path.endswith((".h", ".hpp", ".cuh")) and source_path.startswith(_INSTALLED_HEADER_DIRS):
        return "torch/include/" + source_path
    return source_path


def patch_for_wheel(patch: Path) -> str:
    """The patch text with its source paths replaced by the wheel's."""
    text = patch.read_text()
    for target in patch_targets(patch):
        installed = wheel_path(target)
        if installed != target:
            text = re.sub(rf"^(---|\+\+\+) ([ab])/{re.escape(target)}$",
                          lambda m: f"{m.group(1)} {m.group(2)}/{installed}", text, flags=re.MULTILINE)
            text = text.replace(f"diff --git a/{target} b/{target}",
                                f"diff --git a/{installed} b/{installed}")
    return text


def apply_patch_to_wheel_tree(patch: Path, tree: Path) -> tuple[bool, str]:
    """Apply one recipe patch to an unpacked wheel tree when the wheel carries every file it
    changes: (applied, patch's output). Returns (False, "") when a file is not in the wheel;
    a patch that does not apply cleanly (no fuzz) raises."""
    targets = [wheel_path(t) for t in patch_targets(patch)]
    if not targets or not all((tree / t).is_file() for t in targets):
        return False, ""
    proc = subprocess.run(["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch",
                           "--fuzz=0", "-d", str(tree)], input=patch_for_wheel(patch),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{patch.name} does not apply to the wheel's {', '.join(targets)}: "
                           f"{proc.stdout.strip().splitlines()[-1:]}")
    return True, proc.stdout


@dataclass
class WheelFrontend:
    """build(): lay the wheel out as `setup.py build` leaves it; install(): pip-install that tree.

    `patched`/`unpatched` record which recipe patches reached the laid-out files (the others
    change sources whose products the wheel only carries in generated form). `installs`
    records, per install() call, the cache entries the build would have used, so a test can
    check that the driver retargeted the cache before installing.
    """

    wheel: Path
    cache_fixtures: Path
    patches: list[Path] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    unpatched: list[str] = field(default_factory=list)
    installs: list[dict[str, Any]] = field(default_factory=list)
    linalg_flavour: str | None = None

    def build_dir(self, ctx) -> Path:
        return Path(ctx.src_dir) / "build"

    def lib_dirs(self, ctx) -> list[Path]:
        return sorted(self.build_dir(ctx).glob("lib.*"))

    def build(self, ctx) -> None:
        """First call: unpack the wheel as `setup.py build` leaves its output and write the
        CMake cache. Later calls (the driver's MAGMA flip) only lay out libtorch_cuda_linalg
        for the cache's USE_MAGMA, as the real rebuild only relinks that library."""
        self._check_cuda(ctx)
        build = self.build_dir(ctx)
        interpreter = Interpreter.probe(Path(ctx.python))
        # setup.py build names its output folder after the interpreter it runs with
        lib_dir = build / f"lib.linux-x86_64-{interpreter.tag}"
        cache = build / "CMakeCache.txt"
        if not cache.is_file():
            self._unpack(lib_dir, ctx)
            write_build_cache(fixture_for(self.cache_fixtures, interpreter), cache,
                              Path(ctx.src_dir), interpreter)
        self._lay_out_linalg(lib_dir, read_cache(cache).get("USE_MAGMA", "OFF"))

    def _check_cuda(self, ctx) -> None:
        """The wheel's CUDA version must be the job's: one line, before anything is written."""
        job = ctx.variant.get("cuda_compiler_version") or ctx.env.get("cuda_compiler_version") or "None"
        job = None if job == "None" else job
        wheel = wheel_cuda_version(self.wheel)
        if wheel != job:
            raise MegabuildError(f"{self.wheel.name} is built for {'CUDA ' + wheel if wheel else 'CPU'}, "
                                 f"the job for {'CUDA ' + job if job else 'CPU'}; pick the job of the "
                                 "wheel's CUDA version or a wheel of the job's")

    def _unpack(self, lib_dir: Path, ctx) -> None:
        with zipfile.ZipFile(self.wheel) as wheel:
            for member in wheel.infolist():
                if ".dist-info/" in member.filename:
                    continue
                wheel.extract(member, lib_dir)
                mode = member.external_attr >> 16
                if mode & 0o111:  # zipfile drops permissions; executables and .so files need them
                    os.chmod(lib_dir / member.filename, mode & 0o7777)
        if wheel_cuda_version(self.wheel):
            drop_wheel_rpaths(lib_dir / "torch" / "lib")
        self._apply_patches(lib_dir)
        if ctx.env.get("USE_SYSTEM_PYBIND11") == "1":
            # CMake installs no pybind11 headers into torch/include when it uses the system's
            shutil.rmtree(lib_dir / "torch" / "include" / "pybind11")

    def _lay_out_linalg(self, lib_dir: Path, use_magma: str) -> None:
        """The wheel's libtorch_cuda_linalg when its MAGMA flavour is the cache's; otherwise a
        text file saying that flavour is not in the wheel (the driver stages both flavours;
        a job that packages the missing one must build from source)."""
        member = f"torch/lib/{LINALG}"
        with zipfile.ZipFile(self.wheel) as wheel:
            if member not in wheel.namelist():
                return
            target = lib_dir / member
            tmp = target.with_name(target.name + ".tmp")
            with wheel.open(member) as src, tmp.open("wb") as out:
                shutil.copyfileobj(src, out, 16 << 20)
        os.chmod(tmp, 0o755)
        wanted = use_magma.upper() in ("ON", "1", "TRUE", "YES")
        self.linalg_flavour = "magma" if links_magma(tmp) else "nomagma"
        if (self.linalg_flavour == "magma") != wanted:
            tmp.write_text(f"not built: {self.wheel.name} carries only the {self.linalg_flavour} "
                           f"flavour of {LINALG}; the other one needs a build from source\n")
        else:
            drop_nvidia_rpath(tmp)
        os.replace(tmp, target)

    def _apply_patches(self, lib_dir: Path) -> None:
        """Apply each recipe patch whose files the wheel carries; a patch that fails is fatal."""
        for patch in self.patches:
            applied, _ = apply_patch_to_wheel_tree(patch, lib_dir)
            (self.patched if applied else self.unpatched).append(patch.name)

    def install(self, ctx) -> None:
        """What `pip install . --no-deps --no-build-isolation` does, minus the compile.

        The real command makes setup.py rebuild the Python extension against the interpreter
        named in build/CMakeCache.txt, package build/lib.*/ as a wheel and install that wheel
        with ctx.python's pip. Here build/lib.*/ (the upstream wheel's files, patched as the
        recipe's source would be) is packaged with the upstream dist-info and installed the
        same way, so pip writes RECORD, entry points and .pyc files as it would for the real
        build. Nothing is compiled, so an unretargeted cache would go unnoticed: refuse to
        install when the cache names another interpreter (the real build would then have
        produced an extension for the wrong Python).
        """
        cache = read_cache(self.build_dir(ctx) / "CMakeCache.txt")
        target = Interpreter.probe(Path(ctx.python))
        seen = {key: cache.get(key) for key in RETARGETED_KEYS}
        self.installs.append({"python": str(ctx.python), "cache": seen,
                              "record": cache.get("_Python_INTERPRETER_PROPERTIES")})
        expected_extension = f".{target.soabi}.so"
        if seen["PYTHON_MODULE_EXTENSION"] != expected_extension or \
                os.path.abspath(seen["Python_EXECUTABLE"] or "") != os.path.abspath(ctx.python):
            raise RuntimeError(
                f"build/CMakeCache.txt targets {seen['Python_EXECUTABLE']} "
                f"({seen['PYTHON_MODULE_EXTENSION']}), not {ctx.python} ({expected_extension}): "
                "the driver did not retarget the cache before installing")
        lib_dirs = self.lib_dirs(ctx)
        if len(lib_dirs) != 1:
            raise RuntimeError(f"expected one build/lib.* folder, found {[p.name for p in lib_dirs]}")
        wheel = self._pack(lib_dirs[0], self.build_dir(ctx) / "dist")
        env = {k: v for k, v in dict(ctx.env).items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        subprocess.run([str(ctx.python), "-m", "pip", "install", "--no-deps", "--no-index",
                        "--disable-pip-version-check", "--quiet", str(wheel)],
                       check=True, env=env, cwd=str(ctx.src_dir))

    def _pack(self, lib_dir: Path, dist: Path) -> Path:
        """A wheel of lib_dir's files plus the upstream dist-info, with a RECORD that matches."""
        dist.mkdir(parents=True, exist_ok=True)
        out = dist / self.wheel.name
        tmp = out.with_name(out.name + ".tmp")
        record_lines = []
        with zipfile.ZipFile(self.wheel) as upstream, \
                zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as packed:
            for path in sorted(p for p in lib_dir.rglob("*") if p.is_file()):
                name = path.relative_to(lib_dir).as_posix()
                packed.write(path, name)
                record_lines.append(f"{name},{_file_digest(path)},{path.stat().st_size}")
            dist_info = [m for m in upstream.infolist() if ".dist-info/" in m.filename]
            record_name = next(m.filename for m in dist_info if m.filename.endswith("/RECORD"))
            for member in dist_info:
                if member.filename == record_name:
                    continue
                data = upstream.read(member)
                if member.filename.endswith("/METADATA"):
                    data = source_build_metadata(data.decode()).encode()
                packed.writestr(member, data)
                record_lines.append(f"{member.filename},{_digest(data)},{len(data)}")
            record_lines.append(f"{record_name},,")
            packed.writestr(record_name, "\n".join(record_lines) + "\n")
        os.replace(tmp, out)
        return out


def _digest(data: bytes) -> str:
    return _record_hash(hashlib.sha256(data))


def _file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return _record_hash(hashlib.file_digest(f, "sha256"))


def _record_hash(h: Any) -> str:
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def unpack_size(wheel: Path) -> int:
    """Bytes the wheel occupies once unpacked (for disk-space checks)."""
    with zipfile.ZipFile(wheel) as zf:
        return sum(m.file_size for m in zf.infolist())


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def write_frontend_override(dest: Path, wheel: Path, cache_fixtures: Path, patches: list[Path]) -> Path:
    """A file for the driver's $MEGABUILD_FRONTEND: its frontend() is a WheelFrontend of these
    arguments, so a real recipe build (rattler-build, build.sh, the driver's steps) packages the
    real wheel instead of compiling PyTorch."""
    repo_root = REPO_ROOT
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(
        '"""Written by tests/support/real_wheel/wheel_frontend.py for MEGABUILD_FRONTEND."""\n'
        "import sys\nfrom pathlib import Path\n\n"
        f"sys.path.insert(0, {str(repo_root)!r})\n"
        "from tests.support.real_wheel.wheel_frontend import WheelFrontend  # noqa: E402\n\n\n"
        "def frontend():\n"
        f"    return WheelFrontend(Path({str(wheel)!r}), Path({str(cache_fixtures)!r}),\n"
        f"                         [Path(p) for p in {[str(p) for p in patches]!r}])\n")
    return dest
