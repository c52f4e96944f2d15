"""The build request: what the user asked of the build itself, resolved once from the command
line and the environment (`request_from_arguments`) and frozen. Every plan is made from it; a
Slurm task gets exactly it, through job.json (`to_json` / `from_json`), and decides only the
machine's own values for itself (localbuild.plan.Options holds both).
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import engine as engines
from .channels import parse_channels
from .location.apptainer import parse_sif
from .overrides import validated_overrides
from .source_tarball import tarball_path


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

    @property
    def compile_cache_dir(self) -> Path | None:
        """The cache folder (mounted into containers), None for a URL or no cache."""
        if self.compile_cache is None or "://" in self.compile_cache:
            return None
        return Path(self.compile_cache)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(engine=self.engine.executable, channels=list(self.channels), pythons=list(self.pythons),
                    source_tarball=str(self.source_tarball) if self.source_tarball else None)
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
                      source_tarball=Path(values["source_tarball"]) if values["source_tarball"] else None)
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
        tool=args.tool, channels=parse_channels(args.channel),
        source_tarball=tarball_path(args.source_tarball) if args.source_tarball is not None else None,
        apptainer_image=parse_sif(args.apptainer_image), emulate=args.emulate, skip_tests=args.skip_tests,
        test_only=args.test_only, gpu_tests=args.gpu_tests, upload=args.upload, output_id=args.output_id,
        **overrides)
