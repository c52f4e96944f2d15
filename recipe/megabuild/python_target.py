"""What CMake knows about a Python interpreter, obtained by asking that interpreter.

`PythonTarget.query(python)` runs the interpreter with a small script that reports the same
values CMake's FindPython stores in its cache (version, ABI flags, SOABI, the four library
folders computed the way FindPython computes them, include dir) plus the extension suffix and
NumPy's include dir when NumPy is importable. `PythonTarget.from_cmake_cache(cache)` reads the
same description back from a cache, which tells the retargeting what the cache was configured
against.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .cmake_cache import CMakeCache
from .errors import MegabuildError

# The four library folders as FindPython asks for them in every CMake the recipe accepts
# (3.27 and later, megabuild/tool_versions.py): sysconfig's paths on Python 3.10 and later (CMake
# 3.25 asked distutils first, whose answers differ in a virtual environment and drop the `t`
# of a free-threaded build). The driver supports no Python older than 3.10.
_QUERY = r"""
import json, struct, sys, sysconfig
def libpaths():
    return [sysconfig.get_path(n) for n in ("stdlib", "platstdlib", "purelib", "platlib")]
try:
    import numpy
    numpy_include = numpy.get_include()
except Exception:
    numpy_include = None
cv = sysconfig.get_config_var
import importlib.machinery
stable = [x for x in importlib.machinery.EXTENSION_SUFFIXES if ".abi" in x]
libdir, ldlibrary = cv("LIBDIR"), cv("LDLIBRARY")
stdlib, platstdlib, purelib, platlib = libpaths()
print(json.dumps(dict(
    executable=sys.executable,
    implementation=sys.implementation.name,
    version="%d.%d.%d" % sys.version_info[:3],
    abiflags=getattr(sys, "abiflags", ""),
    pointer_bits=struct.calcsize("P") * 8,
    soabi=cv("SOABI") or "",
    sosabi=stable[0].split(".")[1] if stable else "",
    base_prefix=sys.base_exec_prefix,
    ext_suffix=cv("EXT_SUFFIX") or "",
    cache_tag=sys.implementation.cache_tag or "",
    include_dir=sysconfig.get_path("include"),
    stdlib=stdlib, platstdlib=platstdlib, purelib=purelib, platlib=platlib,
    numpy_include=numpy_include,
    library=(libdir + "/" + ldlibrary) if libdir and ldlibrary else None,
)))
"""


PROPERTY_FIELDS = (11, 12)  # _Python_INTERPRETER_PROPERTIES: CMake <= 3.25, >= 3.26
NO_ABIFLAGS = "<none>"  # how CMake 3.30 and later record an empty ABIFLAGS


@dataclass(frozen=True)
class PythonTarget:
    executable: str
    version: str  # "3.12.1"
    soabi: str  # "cpython-312-x86_64-linux-gnu"
    ext_suffix: str  # ".cpython-312-x86_64-linux-gnu.so"
    include_dir: str
    stdlib: str
    platstdlib: str
    purelib: str
    platlib: str
    abiflags: str = ""
    pointer_bits: int = 64
    numpy_include: str | None = None
    library: str | None = None
    cache_tag: str = ""  # "cpython-312"; derived from the version when empty
    sosabi: str = ""  # "abi3": the stable-ABI suffix FindPython records from CMake 3.26 on
    base_prefix: str = ""  # sys.base_exec_prefix: scikit-build-core's Python_ROOT_DIR

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def nodot(self) -> str:
        return self.major_minor.replace(".", "")

    @property
    def free_threaded(self) -> bool:
        """A free-threaded (no-GIL) build: ABI flag `t`, SOABI `cpython-313t-...`."""
        return "t" in self.abiflags or f"cpython-{self.nodot}t" in self.soabi

    @property
    def pyc_tag(self) -> str:
        return self.cache_tag or f"cpython-{self.nodot}"

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def query(cls, python: Path, env: Mapping[str, str] | None = None) -> "PythonTarget":
        """Ask `python` itself; a missing or broken interpreter is a one-line error."""
        python = Path(python)
        if not python.exists():
            raise MegabuildError(f"Python interpreter {python} not found; set PYTHON to the "
                                 "interpreter of this output")
        try:
            proc = subprocess.run([str(python), "-I", "-c", _QUERY], capture_output=True,
                                  text=True, timeout=120, env=dict(env) if env else None)
        except OSError as exc:
            raise MegabuildError(f"cannot run Python interpreter {python}: {exc}") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise MegabuildError(f"Python interpreter {python} failed to describe itself: {last}")
        data = json.loads(proc.stdout)
        if data.pop("implementation") != "cpython":
            raise MegabuildError(f"{python} is not CPython; PyTorch builds need CPython")
        # keep the path as given (a venv's bin/python is a symlink that must stay one)
        data["executable"] = str(python) if python.is_absolute() else data["executable"]
        return cls(**data)

    @classmethod
    def from_cmake_cache(cls, cache: CMakeCache) -> "PythonTarget":
        """The Python a cache was configured against, from FindPython's entries; a cache
        without FindPython's `Python` record is a one-line error naming the requirement."""
        require_python_record(cache)
        props = cache.get("_Python_INTERPRETER_PROPERTIES").split(";")
        if len(props) not in PROPERTY_FIELDS:
            raise MegabuildError(f"{cache.source}: _Python_INTERPRETER_PROPERTIES has "
                                 f"{len(props)} fields, expected 11 or 12; unsupported CMake "
                                 "version?")
        sosabi = props.pop(7) if len(props) == 12 else ""
        _, major, minor, patch, bits, abiflags, soabi, stdlib, platstdlib, purelib, platlib = props
        executable = (cache.get("_Python_EXECUTABLE") if "_Python_EXECUTABLE" in cache
                      else cache.get("Python_EXECUTABLE"))
        ext_suffix = (cache.get("PYTHON_MODULE_EXTENSION") if "PYTHON_MODULE_EXTENSION" in cache
                      else f".{soabi}.so")
        numpy = cache.entry("_Python_NumPy_INCLUDE_DIR")
        # FindPython's own entry; scikit-build-core also sets Python_LIBRARY and PYTHON_LIBRARY
        library = next((cache.entry(k) for k in ("_Python_LIBRARY_RELEASE", "Python_LIBRARY",
                                                  "PYTHON_LIBRARY") if cache.entry(k)), None)
        return cls(
            executable=executable, version=f"{major}.{minor}.{patch}", soabi=soabi,
            ext_suffix=ext_suffix, include_dir=cache.get("_Python_INCLUDE_DIR"),
            stdlib=stdlib, platstdlib=platstdlib, purelib=purelib, platlib=platlib,
            abiflags="" if abiflags == NO_ABIFLAGS else abiflags, pointer_bits=int(bits or 64), sosabi=sosabi,
            base_prefix=next((cache.get(k) for k in ("Python_ROOT_DIR", "Python3_ROOT_DIR")
                              if k in cache), ""),
            numpy_include=numpy.value if numpy and numpy.value else None,
            library=library.value if library and library.value else None,
        )


RECORD_ENTRIES = ("_Python_INTERPRETER_PROPERTIES", "_Python_INCLUDE_DIR")
_OTHER_PREFIX = re.compile(r"^_(Python[23])_INTERPRETER_PROPERTIES$")


def require_python_record(cache: CMakeCache) -> None:
    """The megabuild retargets what FindPython records under the `Python` prefix, as PyTorch's
    `find_package(Python ... COMPONENTS Interpreter Development.Module)` writes it; a project
    that finds its interpreter another way cannot be retargeted, and is told so."""
    missing = [key for key in RECORD_ENTRIES if key not in cache]
    if not missing:
        return
    others = sorted({m.group(1) for m in (_OTHER_PREFIX.match(e.key) for e in cache) if m})
    found = (f"the project finds Python with find_package({others[0]} ...)" if others else
             "the project's configure did not run FindPython")
    raise MegabuildError(f"{cache.source}: {found}, so the cache has no {missing[0]}; the "
                         "megabuild retargets FindPython's `Python` prefix only: find the "
                         "interpreter with find_package(Python COMPONENTS Interpreter "
                         "Development.Module), as PyTorch's CMakeLists.txt does")
