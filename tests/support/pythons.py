"""The CPython interpreters on this machine (pyenv's and python3.X on PATH), for the tests and the benchmarks."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path


def find_cpythons(min_version: tuple[int, int] = (3, 10)) -> dict[str, Path]:
    """Every CPython >= min_version on this machine: pyenv's versions and python3.X on PATH.

    Returns {"3.11": Path(interpreter)}, one interpreter per minor version, resolved to a real file.
    """
    found: dict[str, Path] = {}
    candidates: list[str] = []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(glob.glob(str(pyenv_root / "versions" / "*" / "bin" / "python3.*")))
    for minor in range(min_version[1], 20):
        exe = shutil.which(f"python3.{minor}")
        if exe:
            candidates.append(exe)
    for exe in candidates:
        if not re.search(r"python3\.\d+$", exe) or not os.access(exe, os.X_OK):
            continue
        try:
            out = subprocess.run(
                [exe, "-c", "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); "
                 "print(sys.executable); print(int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))"],
                capture_output=True, text=True, timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode != 0:
            continue
        version, executable, freethreaded = out.stdout.split()
        if freethreaded == "1":
            continue
        if tuple(int(x) for x in version.split(".")) < min_version:
            continue
        found.setdefault(version, Path(executable).resolve())
    return dict(sorted(found.items(), key=lambda kv: tuple(int(x) for x in kv[0].split("."))))
