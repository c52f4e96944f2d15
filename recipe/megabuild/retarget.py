"""Retarget a CMake cache from the Python it was configured with to another Python.

Only Python entries change. An entry is a Python entry when its key names Python, pybind11 or
NumPy, or when its value refers to one of the old interpreter's folders (CMAKE_PREFIX_PATH
holds the build interpreter's site-packages without saying so). Each such value is rewritten
structurally, never by searching for version strings:

- FindPython's record of the interpreter it found (`RECORD_KEYS`: `_Python_EXECUTABLE`,
  `_Python_INTERPRETER_PROPERTIES` and its signature) is dropped, never rewritten: with
  `Python_EXECUTABLE` naming the new interpreter and no record, FindPython asks that
  interpreter itself and writes the record in the spelling of the CMake in use (from 3.30 an
  empty ABIFLAGS is `<none>`, before it an empty field; a record in the wrong spelling makes
  FindPython miss `Development.Module`). Measured on the test project: the same objects
  recompile per Python switch as with a rewritten record (docs/driver.md);
- `FIND_PACKAGE_MESSAGE_DETAILS_*` has its bracketed fields mapped (paths, `v3.12.1`);
- every other value is split as a CMake list and each element that is an old path (or lies
  under an old library/include folder), the old SOABI or the old extension suffix is replaced.

CMake's entries about itself (`CMAKE_COMMAND`, `CMAKE_ROOT`, ...) are not retargeted, even when
CMake is installed in the old interpreter's site-packages (PyPI's cmake): they are not Python
entries (a CMake that is gone is the step's business: `cmake_self`). FindPython's other `_Python_*_SIGNATURE` checksums are left stale: a new interpreter
makes FindPython recompute what depends on it. Afterwards every Python entry is checked for traces of the old
interpreter (its paths, SOABI, `3.12`, `3;12`, `cpython-312`, `python3.12`, and between a GIL
and a free-threaded build of one version the other ABI's `3.13`/`3.13t` spellings); any trace
stops the driver with an error naming the entry, before anything is written.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .cmake_cache import CMakeCache
from .errors import MegabuildError
from .python_target import PythonTarget

PYTHON_KEY = re.compile(r"python|pybind11|numpy", re.IGNORECASE)
SIGNATURE_KEY = re.compile(r"^_Python\w*_SIGNATURE$")
PROPERTIES_KEY = "_Python_INTERPRETER_PROPERTIES"
RECORD_KEYS = ("_Python_EXECUTABLE", PROPERTIES_KEY, "_Python_INTERPRETER_SIGNATURE")
# CMake's own installation, recorded at every configure; a PyPI cmake lives in site-packages
CMAKE_OWN_KEYS = frozenset({"CMAKE_COMMAND", "CMAKE_CTEST_COMMAND", "CMAKE_CPACK_COMMAND",
                            "CMAKE_ROOT"})
MESSAGE_KEY = re.compile(r"^FIND_PACKAGE_MESSAGE_DETAILS_")


@dataclass(frozen=True)
class CacheChange:
    key: str
    old: str
    new: str | None  # None: the entry is dropped

    def describe(self) -> str:
        if self.new is None:
            return f"{self.key}: dropped ({self.old}); FindPython writes it again for the new interpreter"
        return f"{self.key}: {self.old} -> {self.new}"


class _PathMap:
    """Old -> new for the interpreter's paths and ABI tokens."""

    def __init__(self, old: PythonTarget, new: PythonTarget) -> None:
        self.exact: dict[str, str] = {old.executable: new.executable,
                                      old.ext_suffix: new.ext_suffix, old.soabi: new.soabi}
        if old.library and new.library:
            self.exact[old.library] = new.library
        folders = [(old.include_dir, new.include_dir), (old.stdlib, new.stdlib),
                   (old.platstdlib, new.platstdlib), (old.purelib, new.purelib),
                   (old.platlib, new.platlib), (old.base_prefix, new.base_prefix)]
        if old.numpy_include:
            folders.append((old.numpy_include, new.numpy_include or ""))
        # longest first, so numpy's include dir wins over the site-packages that contains it
        self.folders = sorted({o: n for o, n in folders if o}.items(), key=lambda kv: -len(kv[0]))
        self.old, self.new = old, new

    def references_old(self, value: str) -> bool:
        return any(self._map_element(e) != e for e in value.split(";") if e)

    def _map_element(self, element: str) -> str:
        if element in self.exact:
            return self.exact[element]
        for old_dir, new_dir in self.folders:
            if element == old_dir or element.startswith(old_dir + "/"):
                return new_dir + element[len(old_dir):]
        return element

    def map_element(self, key: str, element: str) -> str:
        mapped = self._map_element(element)
        if mapped != element and self.old.numpy_include and element.startswith(
                self.old.numpy_include) and not self.new.numpy_include:
            raise MegabuildError(f"cache entry {key} needs NumPy, but {self.new.executable} "
                                 "cannot import numpy; install numpy into the target Python")
        return mapped

    def map_list(self, key: str, value: str) -> str:
        return ";".join(self.map_element(key, e) for e in value.split(";"))

    def map_message(self, key: str, value: str) -> str:
        def field(match: re.Match[str]) -> str:
            text = match.group(1)
            if text == f"v{self.old.version}" or text.startswith(f"v{self.old.version}("):
                text = f"v{self.new.version}" + text[len(self.old.version) + 1:]
            else:
                text = self.map_list(key, text)
            return f"[{text}]"
        return re.sub(r"\[([^\[\]]*)\]", field, value)


def python_entry_keys(cache: CMakeCache, old: PythonTarget, new: PythonTarget) -> list[str]:
    """Keys of the entries that belong to the Python configuration (checksums excluded)."""
    paths = _PathMap(old, new)
    return [e.key for e in cache
            if not SIGNATURE_KEY.match(e.key) and e.key not in CMAKE_OWN_KEYS
            and (PYTHON_KEY.search(e.key) or paths.references_old(e.value))]


def retarget_cache(cache: CMakeCache, new: PythonTarget,
                   old: PythonTarget | None = None) -> list[CacheChange]:
    """Rewrite `cache` in place for `new`; returns the changes (nothing else is touched).

    `old` defaults to the interpreter the cache itself records. Raises MegabuildError, with
    the cache unchanged, when a Python entry would still refer to the old interpreter.
    """
    old = old or PythonTarget.from_cmake_cache(cache)
    paths = _PathMap(old, new)
    keys = python_entry_keys(cache, old, new)
    # the same interpreter keeps its record (a step for the split's own Python); any other,
    # even one at the same path (conda-build gives every output the same $PREFIX), drops it
    planned: list[CacheChange] = [] if same_interpreter(old, new) else [
        CacheChange(key, cache.get(key), None) for key in RECORD_KEYS if key in cache]
    dropped = {change.key for change in planned}
    keys = [key for key in keys if key not in dropped]
    for key in keys:
        value = cache.get(key)
        updated = (paths.map_message(key, value) if MESSAGE_KEY.match(key)
                   else paths.map_list(key, value))
        if updated != value:
            planned.append(CacheChange(key, value, updated))
    after = {key: cache.get(key) for key in keys}
    after.update({change.key: change.new for change in planned if change.new is not None})
    for key, value in after.items():
        checked = requested_version_removed(value) if MESSAGE_KEY.match(key) else value
        trace = find_trace(checked, old, new)
        if trace:
            raise MegabuildError(f"{cache.source}: entry {key} still refers to the old Python "
                                 f"({trace!r} in {value[:120]!r}) after retargeting to "
                                 f"{new.executable}; the driver does not know how to rewrite it")
    for change in planned:
        if change.new is None:
            cache.remove(change.key)
        else:
            cache.set(change.key, change.new)
    return planned


def same_interpreter(old: PythonTarget, new: PythonTarget) -> bool:
    """Whether FindPython's record of `old` describes `new` too (the fields it holds)."""
    fields = ("executable", "version", "abiflags", "soabi", "stdlib", "platstdlib", "purelib",
              "platlib", "pointer_bits")
    return all(getattr(old, name) == getattr(new, name) for name in fields)


def requested_version_removed(message: str) -> str:
    """`[v3.12.1(3.10)]` -> `[v3.12.1()]`: the part in parentheses is the minimum version the
    project asked for in find_package(), not a property of the interpreter."""
    return re.sub(r"\[v([^\[\]()]*)\([^\[\]()]*\)\]", r"[v\1()]", message)


def find_trace(value: str, old: PythonTarget, new: PythonTarget) -> str | None:
    """The first piece of `value` that can only come from the old Python, or None."""
    candidates = [old.executable, old.include_dir, old.stdlib, old.platstdlib, old.purelib,
                  old.platlib, old.numpy_include, old.library, old.soabi, old.ext_suffix]
    news = {new.executable, new.include_dir, new.stdlib, new.platstdlib, new.purelib,
            new.platlib, new.numpy_include, new.library, new.soabi, new.ext_suffix}
    for text in candidates:
        # a new path may contain an old one as a prefix; only flag what the new one lacks
        if text and text not in news and text in value and not any(
                n and text in n and n in value for n in news):
            return text
    major, minor = old.major_minor.split(".")
    if old.free_threaded != new.free_threaded:
        # same version, other ABI: 3.13t leaves `3.13t`/`cpython-313t`/`python3.13t`; 3.13
        # leaves `3.13` or `cpython-313` not followed by the `t` the new ABI needs
        patterns = ((rf"(?<![\d.]){major}\.{minor}t", rf"cpython-{major}{minor}t")
                    if old.free_threaded else
                    (rf"(?<![\d.]){major}\.{minor}(?![\d.t])", rf"cpython-{major}{minor}(?![\dt])"))
        for pattern in patterns:
            match = re.search(pattern, value)
            if match:
                return match.group(0)
    if old.major_minor != new.major_minor:
        for pattern in (rf"(?<![\d.]){major}\.{minor}(?!\d)", rf"(?<!\d){major};{minor}(?!\d)",
                        rf"cpython-{major}{minor}(?!\d)", rf"python{major}\.{minor}(?!\d)"):
            match = re.search(pattern, value)
            if match:
                return match.group(0)
    return None
