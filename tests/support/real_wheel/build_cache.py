"""A real PyTorch CMakeCache.txt, moved onto this machine's source tree and build interpreter.

The driver's pytorch step retargets the pristine cache to each Python; to exercise that for real the
layout test needs a cache whose Python entries name a real interpreter. The fixture caches under
tests/fixtures/pytorch-cmakecache were written by PyTorch's own configure with placeholder paths
(`/src/pytorch`, `/opt/envs/py3XY`, `/opt/python/3.X.Y`); this module substitutes the real ones.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

FIXTURE_SOURCE_DIR = "/src/pytorch"


@dataclass(frozen=True)
class Interpreter:
    """What a CMake cache records about one CPython."""

    executable: Path
    prefix: Path         # sys.prefix (the virtual environment)
    base_prefix: Path    # sys.base_prefix (the CPython install)
    version: tuple[int, int, int]
    soabi: str           # e.g. cpython-311-x86_64-linux-gnu
    include_dir: Path

    @property
    def short(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def tag(self) -> str:
        return f"cpython-{self.version[0]}{self.version[1]}"

    @classmethod
    def probe(cls, python: Path) -> "Interpreter":
        code = ("import json, sys, sysconfig; print(json.dumps([sys.prefix, sys.base_prefix, "
                "list(sys.version_info[:3]), sysconfig.get_config_var('SOABI'), "
                "sysconfig.get_paths()['include']]))")
        out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
        prefix, base, version, soabi, include = json.loads(out.stdout)
        return cls(Path(python), Path(prefix), Path(base), tuple(version), soabi, Path(include))


def fixture_for(fixture_dir: Path, interpreter: Interpreter) -> Path:
    """The fixture cache configured against the same minor version, or a one-line error."""
    path = fixture_dir / f"CMakeCache.py{interpreter.version[0]}{interpreter.version[1]}.txt"
    if not path.is_file():
        available = sorted(p.name for p in fixture_dir.glob("CMakeCache.py*.txt"))
        raise FileNotFoundError(f"no fixture cache for Python {interpreter.short} in {fixture_dir}; "
                                f"have {available}")
    return path


def write_build_cache(fixture: Path, dest: Path, source_dir: Path, interpreter: Interpreter) -> None:
    """Write `fixture` to `dest` as if PyTorch had been configured in `source_dir` with `interpreter`.

    The interpreter must be a virtual environment's python (the fixture's interpreters were), so
    that the cache has the same shape: interpreter under the environment, headers and stdlib under
    the base install.
    """
    text = fixture.read_text()
    old_version = _fixture_full_version(text)
    old_major_minor = ".".join(old_version.split(".")[:2])
    old_env = f"/opt/envs/py{old_major_minor.replace('.', '')}"
    old_base = f"/opt/python/{old_version}"
    new_version = ".".join(str(v) for v in interpreter.version)
    replacements = [
        (FIXTURE_SOURCE_DIR, str(source_dir)),
        (f"{old_env}/bin/python", str(interpreter.executable)),
        (old_env, str(interpreter.prefix)),
        (f"{old_base}/include/python{old_major_minor}", str(interpreter.include_dir)),
        (old_base, str(interpreter.base_prefix)),
        (f"[v{old_version}()]", f"[v{new_version}()]"),
        (f"Python;{old_version.replace('.', ';')};", f"Python;{new_version.replace('.', ';')};"),
    ]
    for old, new in replacements:
        if old not in text:
            raise ValueError(f"fixture {fixture} does not contain {old!r}; has its format changed?")
        text = text.replace(old, new)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, dest)


def read_cache(path: Path) -> dict[str, str]:
    """KEY -> VALUE of a CMakeCache.txt (types dropped; comments skipped)."""
    entries: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line or line.startswith(("#", "//")) or "=" not in line:
            continue
        key_type, value = line.split("=", 1)
        entries[key_type.split(":", 1)[0]] = value
    return entries


def _fixture_full_version(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("FIND_PACKAGE_MESSAGE_DETAILS_Python:"):
            return line.rsplit("[v", 1)[1].split("(")[0]
    raise ValueError("fixture cache has no FIND_PACKAGE_MESSAGE_DETAILS_Python entry")
