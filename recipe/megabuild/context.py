"""Everything one driver step needs, read once from the environment conda-build sets.

`BuildContext.from_environ(os.environ)` is the only place that reads the process environment;
steps get paths, the variant (conda-build's variables, as strings) and `env`, the environment
for child processes computed by `build_env.build_environment`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from .build_env import build_environment
from .errors import MegabuildError

# conda-build variables (and the driver's own knobs) that make up the variant
VARIANT_KEYS = (
    "PKG_NAME", "PKG_VERSION", "PKG_BUILDNUM", "PY_VER", "cuda_compiler_version", "rocm_version",
    "gpu_backend", "blas_impl", "use_magma", "megabuild", "target_platform", "CPU_COUNT",
    "arm_variant_type",
)
STAGE_DIR_NAME = "megabuild-stage"


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class BuildContext:
    src_dir: Path  # PyTorch source tree (SRC_DIR)
    prefix: Path  # PREFIX: the environment this output installs into
    stage_dir: Path  # where the split step stages files
    python: Path  # interpreter for this step (PYTHON)
    variant: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    # the front end's build folder when it is not the default inside the source tree (the
    # develop step keeps it beside its environment, out of the user's checkout)
    build_dir: Path | None = None

    @classmethod
    def create(cls, src_dir: Path, prefix: Path, python: Path, variant: Mapping[str, str],
               base_environ: Mapping[str, str], stage_dir: Path | None = None,
               build_dir: Path | None = None, work_dir: Path | None = None) -> "BuildContext":
        """A context whose env is computed from `variant` and `base_environ`; `work_dir` holds
        the build's own files (job-pool include, temporary folder): the source tree by default."""
        src_dir = Path(src_dir)
        return cls(src_dir=src_dir, prefix=Path(prefix),
                   stage_dir=Path(stage_dir) if stage_dir else src_dir / STAGE_DIR_NAME,
                   python=Path(python), variant=_frozen(variant),
                   env=_frozen(build_environment(variant, base_environ, src_dir=Path(work_dir or src_dir))),
                   build_dir=Path(build_dir) if build_dir else None)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "BuildContext":
        missing = [name for name in ("SRC_DIR", "PREFIX", "PYTHON", "PKG_NAME")
                   if not environ.get(name)]
        if missing:
            raise MegabuildError(f"{', '.join(missing)} not set; run the driver through "
                                 "conda-build (recipe/build.sh) or export them yourself")
        variant = {key: environ[key] for key in VARIANT_KEYS if key in environ}
        stage, build, work = (environ.get(f"MEGABUILD_{name}_DIR") for name in ("STAGE", "BUILD", "WORK"))
        return cls.create(Path(environ["SRC_DIR"]), Path(environ["PREFIX"]),
                          Path(environ["PYTHON"]), variant, environ,
                          Path(stage) if stage else None, Path(build) if build else None,
                          Path(work) if work else None)
