"""Helpers for the build-locally tests: a throwaway feedstock tree with small .ci_support
configs in conda-smithy's format, the fake container engine on PATH, and a runner."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_DOCKER = Path(__file__).resolve().parent / "fake_docker" / "fake_docker.py"
TOKENS = {"BINSTAR_TOKEN": "binstar-secret-1", "ANACONDA_API_TOKEN": "anaconda-secret-2",
          "FEEDSTOCK_TOKEN": "feedstock-secret-3", "GITHUB_TOKEN": "github-secret-4"}

CUDA_IMAGE = "quay.io/condaforge/linux-anvil-x86_64-cuda12:alma9"
CPU_IMAGE = "quay.io/condaforge/linux-anvil-x86_64:alma9"


def config_yaml(platform: str = "linux-64", cuda: str = "None", blas: str = "mkl",
                pythons: tuple[str, ...] = ("3.10", "3.11", "3.12", "3.13", "3.14"),
                image: str | None = CPU_IMAGE, megabuild: bool = True,
                rocm: str | None = None, channels: str = "conda-forge") -> str:
    """A config as conda-smithy writes it (sorted keys, indentless lists, quoted versions)."""
    lines = ["blas_impl:", f"- {blas}", "c_compiler:", "- gcc", "c_compiler_version:", "- '14'",
             "cdt_name:", "- conda", "channel_sources:", f"- {channels}", "channel_targets:",
             "- conda-forge main", "cuda_compiler:", "- cuda-nvcc", "cuda_compiler_version:",
             f"- {cuda if cuda == 'None' else repr(cuda)}", "cxx_compiler_version:", "- '14'"]
    if image:
        lines += ["docker_image:", f"- {image}"]
    lines += ["is_python_min:"] + [f"- '{'true' if i == 0 else 'false'}'" for i in range(len(pythons))]
    lines += ["megabuild:", f"- {'true' if megabuild else 'false'}",
              "pin_run_as_build:", "  python:", "    min_pin: x.x", "    max_pin: x.x",
              "python:"] + [f"- {p}.* *_cpython" for p in pythons]
    if rocm:
        lines += ["rocm_version:", f"- '{rocm}'"]
    lines += ["target_platform:", f"- {platform}",
              "zip_keys:", "- - c_compiler_version", "  - cxx_compiler_version",
              "  - cuda_compiler_version", "- - python", "  - is_python_min"]
    return "\n".join(lines) + "\n"


STANDARD_CONFIGS = {
    "linux_64_blas_implgenericcuda_compiler_versionNone": dict(blas="generic"),
    "linux_64_blas_implmklcuda_compiler_version12.9": dict(cuda="12.9", image=CUDA_IMAGE),
    "linux_64_blas_implmklcuda_compiler_version13.0": dict(cuda="13.0", image=CUDA_IMAGE),
    "linux_64_blas_implmklcuda_compiler_versionNone": dict(),
    "osx_arm64_python3.12.____cpython": dict(platform="osx-arm64", blas="generic", image=None,
                                            pythons=("3.12",), megabuild=False),
}


@dataclass
class Feedstock:
    root: Path
    bin_dir: Path
    log: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("FAKE_DOCKER", "CONDA_FORGE_DOCKER")) and k not in TOKENS
               and k not in ("CPU_COUNT", "DOCKER_EXECUTABLE", "CI", "CONDA_OVERRIDE_CUDA")}
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["FAKE_DOCKER_LOG"] = str(self.log)
        env.update(extra)
        return env

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
            isolated: bool = True, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
        """python [-S] build-locally.py ARGS in the tree, stdout and stderr captured."""
        flags = ["-S"] if isolated else []
        return subprocess.run([sys.executable, *flags, str(self.root / "build-locally.py"), *args],
                              cwd=self.root, env=env if env is not None else self.env(),
                              stdin=stdin, capture_output=True, text=True, timeout=timeout)

    def calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def runs(self) -> list[dict]:
        return [call for call in self.calls() if call["argv"][:1] == ["run"]]

    @property
    def artifacts(self) -> Path:
        return self.root / "build_artifacts"

    def marker(self, config: str) -> Path:
        return self.artifacts / f"conda-forge-build-done-{config}"


def make_feedstock(tmp_path: Path, configs: dict[str, dict] | None = None) -> Feedstock:
    """A feedstock tree: build-locally.py, localbuild/ (with its in-container stage) copied from the repository,
    .ci_support/ written from ``configs`` ({name: config_yaml kwargs}), a stub recipe/ (with the
    driver's package)."""
    root = tmp_path / "feedstock"
    root.mkdir()
    shutil.copy2(REPO_ROOT / "build-locally.py", root / "build-locally.py")
    for package in ("localbuild", "common"):   # build-locally and its ground floor
        shutil.copytree(REPO_ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    # the driver's package: build-locally reads its arch tables (--dry-run, --cuda-arch checks)
    shutil.copytree(REPO_ROOT / "recipe" / "megabuild", root / "recipe" / "megabuild",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "recipe" / "meta.yaml").write_text("package:\n  name: libtorch-split\n")
    ci = root / ".ci_support"
    ci.mkdir()
    for name, kwargs in (STANDARD_CONFIGS if configs is None else configs).items():
        (ci / f"{name}.yaml").write_text(config_yaml(**kwargs))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for exe in ("docker", "podman"):
        wrapper = bin_dir / exe
        wrapper.write_text(f'#!/bin/sh\nFAKE_DOCKER_EXE={exe} exec "{sys.executable}" -S "{FAKE_DOCKER}" "$@"\n')
        wrapper.chmod(0o755)
    return Feedstock(root, bin_dir, tmp_path / "engine-calls.jsonl")


def option_values(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == option]


FAKE_CONDA = Path(__file__).resolve().parent / "fake_docker" / "fake_conda.py"
# the package file names the fake `conda build` of a config writes
from tests.support.fake_docker.fake_conda import packages as fake_conda_packages  # noqa: E402,F401


def install_fake_conda(bin_dir: Path) -> None:
    """`conda` (and a `conda-build` entry point, which --native looks for) on PATH."""
    for exe in ("conda", "conda-build"):
        wrapper = bin_dir / exe
        prefix = "" if exe == "conda" else "build "
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{FAKE_CONDA}" {prefix}"$@"\n')
        wrapper.chmod(0o755)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def as_strings(value):
    """PyYAML's result with scalars as strings, which is how localbuild keeps them."""
    if isinstance(value, dict):
        return {str(k): as_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_strings(v) for v in value]
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def summary_rows(stdout: str) -> dict[str, list[str]]:
    """config -> [result, duration, packages] from the batch's summary table."""
    lines = stdout[stdout.index("\nsummary: "):].splitlines()
    rows = {}
    for line in lines[3:]:   # "", the counts, the header
        parts = line.split()
        if len(parts) < 4 or line.startswith(("log of failed ", "build-locally: ")):
            break
        rows[parts[0]] = [" ".join(parts[1:-2]), parts[-2], parts[-1]]
    return rows
