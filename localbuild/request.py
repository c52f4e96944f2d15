"""The build request: what the user asked of the build itself, resolved once from the command
line and the environment (`request_from_arguments`) and frozen. Every plan is made from it; a
Slurm task gets exactly it, through job.json (`to_json` / `from_json`), and decides only the
machine's own values for itself (localbuild.plan.Options holds both).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from common.path_kinds import folder_problem

from . import engine as engines
from .channels import parse_channels
from .errors import EXIT_USAGE, LocalBuildError
from .develop import check_tree
from .source_tarball import tarball_path


_CUDA_ARCH = re.compile(r"^\d+\.\d+[af]?(\+PTX)?$")
_ROCM_ARCH = re.compile(r"^gfx[0-9a-f]+(:(xnack|sramecc)[+-])*$")
_DEV_TAG = re.compile(r"^[A-Za-z0-9]{1,32}$")
COMPILE_CACHE_SCHEMES = ("redis", "http")
# more parallel compiles than any one machine runs: a bigger number is a typo (ninja takes an int)
MAX_JOBS = 1024
COMPILE_CACHE_PASSWORD = "FEEDSTOCK_COMPILE_CACHE_PASSWORD"


def parse_compile_cache(value: str) -> str:
    """--compile-cache: a redis:// or http:// URL without credentials, or a folder (resolved)."""
    if "://" not in value:
        folder = Path(os.path.realpath(Path(value).expanduser()))   # a symlink loop stays itself
        problem = folder_problem(folder, may_be_missing=True)
        if problem:
            raise LocalBuildError(f"--compile-cache {value}: {problem}; give a folder (made if "
                                  "missing) or a redis:// or http:// URL", EXIT_USAGE)
        return str(folder)
    parts = urlsplit(value)
    if parts.scheme not in COMPILE_CACHE_SCHEMES:
        raise LocalBuildError(f"--compile-cache {parts.scheme}://...: use redis://host:port, "
                              "http://host/path or a folder", EXIT_USAGE)
    if parts.username or parts.password:
        raise LocalBuildError(f"--compile-cache: the URL carries credentials; remove them and set "
                              f"{COMPILE_CACHE_PASSWORD} in the environment (passed by name)",
                              EXIT_USAGE)
    if not parts.hostname:
        raise LocalBuildError(f"--compile-cache {value!r}: the URL names no host", EXIT_USAGE)
    return value


def _shown_number(value: int) -> str:
    text = str(value)
    return text if len(text) <= 12 else f"{text[:6]}... ({len(text)} digits)"


def validated_overrides(pythons: list[str] | None, cuda_arch: str | None, rocm_arch: str | None,
                        jobs: int | None, ccache: str | None, dev_tag: str | None,
                        compile_cache: str | None = None,
                        compile_cache_read_only: bool = False,
                        heavy_jobs: int | None = None) -> dict[str, Any]:
    """The overrides' fields of the build request (localbuild.request.BuildRequest), from the
    command-line values; bad input raises LocalBuildError (exit 2)."""
    wanted_pythons: list[str] = []
    for value in pythons or []:
        for part in re.split(r"[,\s]+", value.strip()):
            if not part:
                continue
            if not re.fullmatch(r"3\.\d+t?", part):
                raise LocalBuildError(f"--python {part!r}: give versions like 3.12 (or 3.13t)",
                                      EXIT_USAGE)
            if part not in wanted_pythons:
                wanted_pythons.append(part)
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise LocalBuildError(f"--jobs {_shown_number(jobs)}: give 1 to {MAX_JOBS} parallel compiles "
                              "(leave it out to size it from cores and memory)", EXIT_USAGE)
    if heavy_jobs is not None and not 1 <= heavy_jobs <= MAX_JOBS:
        raise LocalBuildError(f"--heavy-jobs {_shown_number(heavy_jobs)}: the heavy targets' job pool "
                              f"needs 1 to {MAX_JOBS} (leave it out to size the pool from memory)", EXIT_USAGE)
    if dev_tag is not None and not _DEV_TAG.match(dev_tag):
        raise LocalBuildError(f"--dev-tag {dev_tag!r}: use 1-32 letters or digits "
                              "(it becomes part of the build string)", EXIT_USAGE)
    if ccache and compile_cache:
        raise LocalBuildError("--ccache DIR is the older spelling of --compile-cache DIR; give "
                              "one of them", EXIT_USAGE)
    cache = parse_compile_cache(compile_cache or ccache) if (compile_cache or ccache) else None
    if compile_cache_read_only and cache is None:
        raise LocalBuildError("--compile-cache-read-only needs --compile-cache", EXIT_USAGE)
    return dict(
        pythons=tuple(wanted_pythons),
        cuda_arch=_arch_list("--cuda-arch", cuda_arch, _CUDA_ARCH, "9.0 or 8.0;9.0+PTX"),
        rocm_arch=_arch_list("--rocm-arch", rocm_arch, _ROCM_ARCH, "gfx90a or gfx90a;gfx942"),
        jobs=jobs, heavy_jobs=heavy_jobs, compile_cache=cache, compile_cache_read_only=compile_cache_read_only,
        dev_tag=dev_tag)


def _arch_list(flag: str, value: str | None, pattern: re.Pattern[str], example: str) -> str | None:
    if value is None:
        return None
    parts = [part for part in re.split(r"[;,\s]+", value.strip()) if part]
    bad = [part for part in parts if not pattern.match(part)]
    if not parts or bad:
        raise LocalBuildError(f"{flag} {value!r}: give architectures like {example}", EXIT_USAGE)
    return ";".join(parts)


def parse_sif(value: str | None) -> str | None:
    """--apptainer-image: an existing local .sif file (made absolute)."""
    if value is None:
        return None
    path = Path(value).expanduser().resolve()
    if not path.is_file():
        raise LocalBuildError(f"--apptainer-image {value}: no such file; give a SIF built with "
                              "`apptainer build IMAGE.sif docker://<the config's image>`",
                              EXIT_USAGE)
    return str(path)


@dataclass(frozen=True)
class BuildRequest:
    engine: engines.Engine = engines.Engine("docker")
    native: bool = False
    tool: str | None = None                 # --tool; None: conda-build (native: whichever is installed)
    channels: tuple[str, ...] = ()          # --channel: instead of the config's channel_sources
    source_tarball: Path | None = None      # --source-tarball: the recipe's source, fetched elsewhere
    apptainer_image: str | None = None      # --apptainer-image SIF (else docker://<docker_image>)
    emulate: bool = False
    skip_tests: bool = False
    test_only: bool = False
    gpu_tests: bool = False
    upload: bool = False
    output_id: str | None = None            # --debug --output-id
    # the developer overrides (localbuild/overrides.py): a dev build's Pythons and arch lists,
    # and how fast the same package builds
    pythons: tuple[str, ...] = ()
    cuda_arch: str | None = None            # normalised "8.0;9.0"
    rocm_arch: str | None = None            # normalised "gfx90a;gfx942"
    jobs: int | None = None
    heavy_jobs: int | None = None           # the heavy targets' job pool (FEEDSTOCK_HEAVY_JOBS)
    compile_cache: str | None = None        # a redis:// or http:// URL, or an absolute folder
    compile_cache_read_only: bool = False
    dev_tag: str | None = None              # explicit --dev-tag
    # --develop PATH: the user's checkout (resolved), built in the config's develop environment
    develop: Path | None = None
    shell: bool = False                     # --shell: a shell in that environment instead

    @property
    def compile_cache_dir(self) -> Path | None:
        """The cache folder (mounted into containers), None for a URL or no cache."""
        if self.compile_cache is None or "://" in self.compile_cache:
            return None
        return Path(self.compile_cache)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(engine=self.engine.executable, channels=list(self.channels), pythons=list(self.pythons),
                    source_tarball=str(self.source_tarball) if self.source_tarball else None,
                    develop=str(self.develop) if self.develop else None)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "BuildRequest":
        """The request to_json wrote; ValueError when a field is missing or of another kind."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name not in data:
                raise ValueError(f"no {field.name}")
            values[field.name] = data[field.name]
        values.update(engine=engines.Engine(str(values["engine"])), channels=tuple(values["channels"]),
                      pythons=tuple(values["pythons"]),
                      source_tarball=Path(values["source_tarball"]) if values["source_tarball"] else None,
                      develop=Path(values["develop"]) if values["develop"] else None)
        return cls(**values)


def request_from_arguments(args: argparse.Namespace, environ: dict[str, str], slurm: bool) -> BuildRequest:
    """The request of this command line; bad values are one LocalBuildError line (exit 2),
    the overrides' first."""
    overrides = validated_overrides(args.python, args.cuda_arch, args.rocm_arch, args.jobs, args.ccache,
                                    args.dev_tag, args.compile_cache, args.compile_cache_read_only,
                                    args.heavy_jobs)
    return BuildRequest(
        engine=engines.resolve_engine(args.engine, environ),
        # HPC nodes have no Docker: a Slurm task builds natively unless an engine is named
        native=args.native or (slurm and not args.engine),
        # --develop makes its environment with rattler (localbuild/in_container/develop.py)
        tool="rattler-build" if args.develop is not None else args.tool, channels=parse_channels(args.channel),
        source_tarball=tarball_path(args.source_tarball) if args.source_tarball is not None else None,
        apptainer_image=parse_sif(args.apptainer_image), emulate=args.emulate, skip_tests=args.skip_tests,
        test_only=args.test_only, gpu_tests=args.gpu_tests, upload=args.upload, output_id=args.output_id,
        develop=check_tree(args.develop) if args.develop is not None else None, shell=args.shell,
        **overrides)
