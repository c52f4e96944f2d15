"""The build driver (recipe/megabuild, standard library only) as the tools ask it: the one way
build-locally.py, the feedstock tools and devtools load it.

Each feedstock's driver is loaded under a package name of its own (from its folder), so a
process that looks at two feedstocks (the tests, the lint of a copy) never mixes them up, and
a `megabuild` imported from elsewhere in the process is never taken for this one.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


class DriverMissing(ImportError):
    """The feedstock has no loadable recipe/megabuild package."""


def driver_module(feedstock_root: Path, name: str) -> ModuleType:
    """recipe/megabuild/<name>.py of the feedstock at ``feedstock_root``, imported."""
    package_dir = (Path(feedstock_root) / "recipe" / "megabuild").resolve()
    package = "_feedstock_driver_" + hashlib.sha1(os.fsencode(package_dir)).hexdigest()[:12]
    if package not in sys.modules:
        init = package_dir / "__init__.py"
        spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[str(package_dir)])
        if not init.is_file() or spec is None or spec.loader is None:
            raise DriverMissing(f"no build driver in {package_dir} (recipe/megabuild must be a Python package)")
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[package]
            raise
    return importlib.import_module(f"{package}.{name}")
