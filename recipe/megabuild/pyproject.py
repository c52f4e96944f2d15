"""What the driver reads of a source tree's pyproject.toml's `[tool.scikit-build]` table: the
CMake versions the project accepts and the `cmake.define` entries that read an environment
variable. TOML comes from tomllib (3.11+) or tomli (scikit-build-core's own dependency on
3.10); without either, a line-based reading of the usual spellings stands in."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def _parse(text: str) -> dict[str, Any] | None:
    """The parsed text; None without a TOML reader. An invalid file reads as empty:
    scikit-build-core itself reports it when it runs."""
    try:
        import tomllib as toml
    except ImportError:
        try:
            import tomli as toml  # type: ignore[no-redef]
        except ImportError:
            return None
    try:
        return toml.loads(text)
    except ValueError:
        return {}


def _skbuild(src_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """([tool.scikit-build] or {}, or None without a TOML reader; the file's text)."""
    try:
        text = (Path(src_dir) / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}, ""
    data = _parse(text)
    if data is None:
        return None, text
    table = data.get("tool", {}).get("scikit-build", {})
    return (table if isinstance(table, dict) else {}), text


def cmake_version(src_dir: Path) -> str | None:
    """`[tool.scikit-build] cmake.version` as written (">=3.27", "CMakeLists.txt"), or None."""
    table, text = _skbuild(src_dir)
    if table is None:
        match = re.search(r"^\s*cmake\.version\s*=\s*[\"']([^\"']+)[\"']", text, re.MULTILINE)
        return match.group(1) if match else None
    cmake = table.get("cmake", {})
    version = cmake.get("version") if isinstance(cmake, dict) else None
    return str(version) if version is not None else None


def defines_reading(src_dir: Path, variable: str) -> list[str]:
    """The `[tool.scikit-build.cmake.define]` entries whose value comes from the environment
    variable `variable`, each as `KEY = {env = "variable"}`."""
    table, text = _skbuild(src_dir)
    if table is None:
        pattern = rf"^\s*([\w\"'.-]+)\s*=\s*\{{[^}}]*\benv\s*=\s*[\"']{re.escape(variable)}[\"']"
        return [f'{key.strip(chr(34) + chr(39))} = {{env = "{variable}"}}'
                for key in re.findall(pattern, text, re.MULTILINE)]
    cmake = table.get("cmake", {})
    defines = cmake.get("define", {}) if isinstance(cmake, dict) else {}
    return [f'{key} = {{env = "{variable}"}}' for key, value in
            (defines.items() if isinstance(defines, dict) else [])
            if isinstance(value, dict) and value.get("env") == variable]
