"""Environments with our pytorch: rattler solves from the given channels alone and installs
into a fresh prefix (the packages' cache is shared, so a second environment links, not unpacks)."""
from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from ...errors import FeedstockError
from .channel import TorchBuild


def _await(value):
    return asyncio.run(value) if asyncio.iscoroutine(value) else value


def cuda_of(build: TorchBuild) -> str | None:
    """`13.0` for a cuda130_* build: the `__cuda` a GPU build needs to solve without a driver."""
    match = re.match(r"(?:dev[^_]*_)?cuda(\d+)(\d)_", build.build)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def torch_specs(build: TorchBuild) -> list[str]:
    """The exact pytorch build and its Python."""
    return [f"pytorch =={build.version} {build.build}", f"python {build.python}.*"]


def install(channels: list[Path], specs: list[str], prefix: Path, cache: Path, cuda: str | None = None) -> None:
    """Solve `specs` from `channels` and install into `prefix`; FeedstockError (one line) when
    they cannot be solved."""
    import rattler

    overrides = rattler.VirtualPackageOverrides()
    if cuda:
        overrides.cuda = rattler.Override.string(cuda)
    try:
        records = _await(rattler.solve(sources=[rattler.Channel(c.resolve().as_uri()) for c in channels],
                                       specs=specs, platforms=[_platform(), "noarch"],
                                       virtual_packages=rattler.VirtualPackage.detect(overrides)))
    except Exception as err:  # SolverError's text spans many lines
        raise FeedstockError(f"cannot solve {', '.join(specs)}: {' '.join(str(err).split())[:300]}") from None
    _await(rattler.install(records, target_prefix=prefix, cache_dir=cache, show_progress=False))


def _platform() -> str:
    import rattler

    return str(rattler.Platform.current())


def clean_environ(extra: dict[str, str] | None = None, python: Path | None = None) -> dict[str, str]:
    """This process's environment without the variables that would leak the feedstock's own
    virtual environment into a prefix's Python; with `python`, that prefix activated as conda
    does it (its bin/ first on PATH, CONDA_PREFIX), since tests start `python` by name."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    if python is not None:
        env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
        env["CONDA_PREFIX"] = str(python.parent.parent)
    env.update(extra or {})
    return env
