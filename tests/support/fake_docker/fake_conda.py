"""A stand-in for `conda` (build, debug, index, install) in tests of localbuild/in_container/build_steps.sh
and `build-locally.py --native`; no conda channel is reachable here.

Each call appends a JSON record to $FAKE_CONDA_LOG: {"argv": [...], "marker_exists": bool,
"env": {CONDA_PKGS_DIRS, CONDA_BLD_PATH, CCACHE_DIR, FEEDSTOCK_*, CONDA_OVERRIDE_CUDA, ...}, "config_python": [...]}.
`conda build` writes two packages into --output-folder (exit 1 if FAKE_CONDA_BUILD_FAIL is 1
or the name in $CONFIG), their build strings derived from $CONFIG as conda-build's hash is
from the variant; it takes FAKE_CONDA_BUILD_SECONDS (default 0);
`conda index DIR` writes DIR/<subdir>/repodata.json for the subdirs that hold packages, as a
real indexer does: list the packages, work (FAKE_CONDA_INDEX_SECONDS, default 0), write. Its
record says `index_overlap: true` if another `conda index` of DIR was running meanwhile;
`conda-build --version` prints a version the preflight accepts (25.3.2), unlogged.
A compiling `conda build` record says `build_overlap: true` if another one of the same log was
compiling when it started (two builds in one folder).
"""
from __future__ import annotations

import json
import os
import sys
import time
import zlib
from pathlib import Path

ENV_RECORDED = ("CONDA_PKGS_DIRS", "CONDA_BLD_PATH", "CCACHE_DIR", "FEEDSTOCK_MAX_JOBS",
                "FEEDSTOCK_CUDA_ARCH_LIST", "FEEDSTOCK_DEV_TAG", "CONFIG", "HOST_USER_ID",
                "CONDA_OVERRIDE_CUDA", "FEEDSTOCK_COMPILE_CACHE", "FEEDSTOCK_COMPILE_CACHE_READ_ONLY",
                "FEEDSTOCK_COMPILE_CACHE_PASSWORD")


def packages(config: str) -> tuple[str, str]:
    """What `conda build` of ``config`` writes: a build string per config, as a variant hash."""
    tag = f"h{zlib.crc32(config.encode()):08x}"[:8]
    return f"libtorch-2.13.0-{tag}_0.conda", f"pytorch-2.13.0-py312{tag}_0.conda"


def value_after(argv: list[str], option: str) -> str | None:
    return argv[argv.index(option) + 1] if option in argv else None


def _another_build_runs() -> bool:
    """Whether another `conda build` of this log's runs is at work right now (a second build
    beside a running one): each build leaves its pid in a folder beside the log; a pid that no
    longer runs (a build killed) does not count."""
    running = Path(os.environ["FAKE_CONDA_LOG"] + ".building")
    running.mkdir(exist_ok=True)
    others = False
    for mark in running.iterdir():
        try:
            os.kill(int(mark.name), 0)
            state = Path(f"/proc/{mark.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            others = others or state != "Z"
        except (ValueError, OSError, IndexError):
            continue
    (running / str(os.getpid())).touch()
    return others


def main(argv: list[str]) -> int:
    args = argv[1:]
    if args[:1] == ["build"] and "--version" in args:   # `conda-build --version` (--native preflight)
        print("conda-build 25.3.2")
        return 0
    marker_dir = os.environ.get("FEEDSTOCK_ROOT", "")
    marker = Path(marker_dir, "build_artifacts",
                  os.environ.get("DONE_MARKER", f"conda-forge-build-done-{os.environ.get('CONFIG')}"))
    entry: dict = {"argv": args, "marker_exists": marker.exists(),
                   "env": {k: os.environ[k] for k in ENV_RECORDED if k in os.environ}}
    config_file = value_after(args, "-m")
    if config_file:
        entry["config_python"] = [line[2:] for line in Path(config_file).read_text().splitlines()
                                  if line.startswith("- 3.")]
    command = args[0] if args else ""
    busy = None
    if command == "index" and "--help" not in args:
        busy = Path(args[1], ".fake-conda-index-running")
        try:
            os.close(os.open(busy, os.O_CREAT | os.O_EXCL))
            entry["index_overlap"] = False
        except FileExistsError:   # another indexer works on the same channel right now
            entry["index_overlap"] = True
            busy = None
    compiling = command == "build" and not {"--test", "--output"} & set(args)
    if compiling:
        entry["build_overlap"] = _another_build_runs()
    with open(os.environ["FAKE_CONDA_LOG"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
    if command == "build":
        if "--test" in args:
            return 0
        if "--output" in args:  # what conda-build prints: a note, then one path per package
            print("WARNING: No numpy version specified in conda_build_config.yaml.")
            for name in packages(os.environ.get("CONFIG", "")):
                print(Path(value_after(args, "--output-folder"), "linux-64", name))
            return 0
        print("fake conda-build: compiling ...", flush=True)
        time.sleep(float(os.environ.get("FAKE_CONDA_BUILD_SECONDS", "0")))
        fail = os.environ.get("FAKE_CONDA_BUILD_FAIL", "")
        if fail and fail in ("1", os.environ.get("CONFIG")):
            print("fake conda-build: error: compilation failed", flush=True)
            return 1
        out = Path(value_after(args, "--output-folder")) / "linux-64"
        out.mkdir(parents=True, exist_ok=True)
        for name in packages(os.environ.get("CONFIG", "")):
            (out / name).write_bytes(b"fake package")
        return 0
    if command == "index":
        if "--help" in args:
            return 0
        root = Path(args[1])
        listed = {subdir: sorted(p.name for p in subdir.glob("*.conda"))
                  for subdir in root.iterdir() if subdir.is_dir() and any(subdir.glob("*.conda"))}
        time.sleep(float(os.environ.get("FAKE_CONDA_INDEX_SECONDS", "0")))
        for subdir, names in listed.items():
            (subdir / "repodata.json").write_text(json.dumps({"packages.conda": {n: {} for n in names}}))
        if busy is not None:
            busy.unlink()
        return 0
    if command in ("debug", "install"):
        return 0
    print(f"fake conda: unsupported command {args}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
