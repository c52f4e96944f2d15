"""A free-threaded CPython 3.13t, built from Debian trixie's source package, for the megabuild tests.

PyTorch 2.13 ships 3.14t, whose source is not reachable here; 3.13t exercises the same retarget
(SOABI ``cpython-313t-...``, include dir ``python3.13t``, ``Py_GIL_DISABLED``). The source is the
upstream tarball inside Debian's ``python3.13`` source package (``apt-get source``; apt checks it
against trixie's signed index), built without Debian's patches (they rename site-packages and add
multiarch paths, which the tests do not need): ``./configure --disable-gil``, no PGO/LTO, no test
modules, ``make -j2``, no test run.

Building takes minutes, so the install is cached outside the repository (``cache_root()``), keyed
by the source tarball's sha256 and the configure flags, written under a temporary name and renamed
when complete. The apt state for trixie's ``deb-src`` entry lives in that cache too (a private
sources file and lists folder), so the machine's own apt configuration is never changed.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from tests.support.paths import cache_root

SOURCE_PACKAGE = "python3.13"
SOURCE_VERSION = "3.13.5-2+deb13u5"
ORIG_TARBALL = "python3.13_3.13.5.orig.tar.xz"
# Checksums-Sha256 of the tarball in trixie's Sources index for SOURCE_VERSION
ORIG_SHA256 = "93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640"
CONFIGURE_FLAGS = ("--disable-gil", "--disable-test-modules")
MAKE_JOBS = 2
# trixie and its security suite: the +debNNuN versions are published in the latter first
TRIXIE_SOURCES = """\
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


class FreeThreadedUnavailable(Exception):
    """The free-threaded interpreter cannot be had here; the message says why (tests skip with it)."""


def cache_key() -> str:
    """The source's sha256 and the configure flags: a new source or new flags build afresh."""
    return hashlib.sha256(f"{ORIG_SHA256} {' '.join(CONFIGURE_FLAGS)}".encode()).hexdigest()[:24]


def install_dir() -> Path:
    return cache_root() / "python-3.13t" / cache_key()


def interpreter() -> Path:
    return install_dir() / "bin" / "python3.13t"


def _run(cmd: list[str], cwd: Path, what: str, timeout: float = 3600) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        raise FreeThreadedUnavailable(f"{what} failed (exit {proc.returncode}): {' | '.join(tail)}")


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def fetch_source(dest: Path) -> Path:
    """The verified upstream tarball from trixie's python3.13 source package, downloaded into dest."""
    if shutil.which("apt-get") is None:
        raise FreeThreadedUnavailable("apt-get not found: Debian's python3.13 source cannot be fetched")
    apt_dir = cache_root() / "apt-trixie-src"
    (apt_dir / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    sources = apt_dir / "trixie-src.sources"
    sources.write_text(TRIXIE_SOURCES)
    # private apt state: only the trixie deb-src entry, its own lists, no clean-up of the machine's lists
    private = ["-o", f"Dir::Etc::sourcelist={sources}", "-o", "Dir::Etc::sourceparts=-",
               "-o", f"Dir::State::Lists={apt_dir / 'lists'}", "-o", "APT::Get::List-Cleanup=0",
               "-o", "APT::Sandbox::User=root"]
    dest.mkdir(parents=True, exist_ok=True)
    _run(["apt-get", "-qq", *private, "update"], dest, "apt-get update (trixie deb-src)", timeout=600)
    _run(["apt-get", "-qq", *private, "source", "--download-only", f"{SOURCE_PACKAGE}={SOURCE_VERSION}"],
         dest, f"apt-get source {SOURCE_PACKAGE}={SOURCE_VERSION}", timeout=600)
    tarball = dest / ORIG_TARBALL
    if not tarball.is_file():
        raise FreeThreadedUnavailable(f"apt-get source left no {ORIG_TARBALL} in {dest}")
    if _sha256(tarball) != ORIG_SHA256:
        raise FreeThreadedUnavailable(f"{ORIG_TARBALL} does not have the pinned sha256 {ORIG_SHA256[:12]}...")
    return tarball


def build(work: Path, log=print) -> Path:
    """Configure, make and install 3.13t into the cache entry (under a temporary name, then renamed)."""
    for tool in ("make", "cc"):
        if shutil.which(tool) is None:
            raise FreeThreadedUnavailable(f"{tool} not found: cannot build CPython 3.13t")
    final = install_dir()
    tarball = fetch_source(work / "download")
    with tarfile.open(tarball) as archive:
        archive.extractall(work / "src", filter="tar")
    (source,) = [p for p in (work / "src").iterdir() if (p / "configure").is_file()]
    build_dir = work / "build"
    build_dir.mkdir()
    started = time.monotonic()
    log(f"python3.13t: configure {' '.join(CONFIGURE_FLAGS)} (prefix {final})")
    _run([str(source / "configure"), f"--prefix={final}", *CONFIGURE_FLAGS], build_dir, "configure")
    log(f"python3.13t: make -j{MAKE_JOBS}")
    _run(["make", f"-j{MAKE_JOBS}"], build_dir, "make")
    staging = work / "destdir"
    # DESTDIR keeps the configured prefix (sysconfig names it) while the files land in a temp tree
    _run(["make", "altinstall", f"DESTDIR={staging}", f"COMPILEALL_OPTS=-j{MAKE_JOBS}"], build_dir, "make altinstall")
    built = staging / final.relative_to(final.anchor)
    (built / "complete").write_text(f"{SOURCE_PACKAGE} {SOURCE_VERSION} {' '.join(CONFIGURE_FLAGS)} "
                                    f"built in {time.monotonic() - started:.0f} s\n")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.move(built, tmp)      # same file system as final: the rename below is atomic
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    log(f"python3.13t: built in {time.monotonic() - started:.0f} s")
    return interpreter()


def free_threaded_python(work: Path, log=print) -> Path:
    """The cached 3.13t interpreter, built first when this machine has none for this source."""
    if not (install_dir() / "complete").is_file():
        build(work, log)
    exe = interpreter()
    probe = subprocess.run([str(exe), "-c", "import sys; print(sys._is_gil_enabled())"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0 or probe.stdout.strip() != "False":
        raise FreeThreadedUnavailable(f"{exe} does not run free-threaded: {probe.stdout.strip() or probe.stderr.strip()}")
    return exe


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="python313t-") as scratch:
        print(free_threaded_python(Path(scratch)))
