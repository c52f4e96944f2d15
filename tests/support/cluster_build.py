"""A feedstock tree whose configs the real Slurm builds natively with rattler-build: the recipe's
source is the PyTorch-shaped test project, the channel is the session's toolchain channel.

Configs (one Python each, this machine's compiler and glibc): a Python pair of the cpu/generic
job (3.12 and 3.11: the same C++ core, another extension), a copy that fails at once (Python
3.99: nothing to solve), and a copy meant to be cancelled while it runs. (The cpu/mkl job does
not resolve against these stand-ins yet: libtorch's run `libblas * *mkl`; see
`extra_stand_ins`, which the benchmark uses to try it.) Used by tests/localbuild/slurm/test_slurm_array.py and benchmarks/bench_cluster.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import CPU_GENERIC_JOB
from tests.support.podman import PYTHON, podman_feedstock

MKL_JOB = "linux_64_blas_implmklc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
OTHER_PYTHON = "3.11"
# short names, sorted in the order the array gets them
GENERIC, GENERIC_OTHER, FAILING, CANCELLED = ("linux_64_a_generic", "linux_64_b_generic_py311",
                                              "linux_64_c_failing", "linux_64_d_cancelled")


@dataclass
class ClusterFeedstock:
    root: Path
    channels: list[Path]     # --channel values: the toolchain and the extra stand-ins

    @property
    def artifacts(self) -> Path:
        return self.root / "build_artifacts"

    def marker(self, config: str) -> Path:
        return self.artifacts / f"conda-forge-build-done-{config}"

    def log(self, config: str) -> Path:
        return self.artifacts / f"{config}-log.txt"


def one_python_config(job: str, versions: dict[str, str], work: Path, python: str = PYTHON) -> str:
    """The job's variant with this machine's values and one Python (is_python_min dropped: it is
    zipped with python)."""
    import yaml

    from tests.realbuild.session import machine_variant

    path = machine_variant(job, (python,), versions, work / f"{job}-{python}.yaml")
    data = yaml.safe_load(path.read_text())
    data["channel_sources"] = ["conda-forge"]   # --channel replaces it
    data.pop("is_python_min", None)
    data["zip_keys"] = [keys for keys in data.get("zip_keys", []) if "is_python_min" not in keys]
    return yaml.safe_dump(data, sort_keys=True)


def extra_stand_ins(toolchain, recipe: Path, variant: Path, dest: Path) -> Path:
    """A channel with the stand-ins `variant` needs that the toolchain channel lacks."""
    from tests.support.toolchain import build_outputs, index_channel, machine_outputs, needed_requirements

    have = set(toolchain.packages)   # name-version-build
    # a name the toolchain has may still miss the build this variant pins (libblas * *mkl
    # where the toolchain has libblas ... local_netlib): stand in for those too
    needed = {name: spec for name, spec in needed_requirements(recipe, variant).items()
              if f"{name}-{spec.satisfying_version()}-{spec.satisfying_build()}" not in have
              and not (name in toolchain.names() and spec.build in ("", "*"))}
    outputs, _ = machine_outputs(needed, toolchain.versions, skip=set())
    if outputs:
        build_outputs(dest / "recipes", [("cluster-stand-ins", outputs)], dest / "channel",
                      log=lambda _: None)
    else:
        (dest / "channel" / "noarch").mkdir(parents=True, exist_ok=True)
        index_channel(dest / "channel")
    return dest / "channel"


def cluster_feedstock(work: Path, realbuild_toolchain: dict) -> ClusterFeedstock:
    """The tree under work/feedstock, with the four configs and the channels they build from."""
    from tests.realbuild.feedstock_build import prepare_project_source

    versions = realbuild_toolchain["versions"]
    generic = one_python_config(CPU_GENERIC_JOB, versions, work / "variants")
    other = one_python_config(CPU_GENERIC_JOB, versions, work / "variants", OTHER_PYTHON)
    failing = generic.replace(f"{PYTHON}.* *_cpython", "3.99.* *_cpython")
    assert failing != generic and other != generic
    configs = {GENERIC: generic, GENERIC_OTHER: other, FAILING: failing, CANCELLED: generic}
    root = podman_feedstock(work / "feedstock", prepare_project_source(work / "source"), configs)
    return ClusterFeedstock(root=root, channels=[realbuild_toolchain["toolchain"].channel])


def ccache_counts(cache_dir: Path) -> tuple[int, int]:
    """(compiles the launcher ran the compiler for, compiles served from the cache) over all
    builds that used the ccache folder, from `ccache --print-stats`. (The driver's own
    `compile cache statistics` lines stay in rattler-build's work folder, not in our log.)"""
    import subprocess

    proc = subprocess.run(["ccache", "--dir", str(cache_dir), "--print-stats"],
                          capture_output=True, text=True, check=True, timeout=60)
    stats = {key: int(value) for key, value in
             (line.split("\t") for line in proc.stdout.splitlines() if "\t" in line)
             if value.isdigit()}
    return (stats.get("cache_miss", 0),
            stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0))
