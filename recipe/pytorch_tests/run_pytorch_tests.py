"""Run the curated part of PyTorch's own test suite against the installed package.

The pytorch-tests output of the recipe calls this from its test section, with PyTorch's
`test/` folder from the source tarball (`source_files`) and the variant on the command line:

    python pytorch_tests/run_pytorch_tests.py --tests-dir test --platform linux-64 \\
        --gpu-backend cuda --blas mkl

What runs is data, in selection.json beside this file: the test files, and the skips, each
with the reason and the platforms/variants it applies to. GPU tests run only where a GPU is
present: PyTorch's device-generic tests instantiate CUDA/ROCm variants only when the device
is available, and GPU-only skips apply only then (`gpu_present`). A selected file that is
missing from the tests folder is an error (a broken source tree must not shrink the suite).
Standard library only; pytest comes from the test requirements.
"""
from __future__ import annotations

import argparse
import json
import os
import platform as host
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

SELECTION = Path(__file__).with_name("selection.json")
CONDITIONS = ("platform", "gpu_backend", "blas", "python", "gpu_present")


class SelectionError(Exception):
    pass


def python_label() -> str:
    """`3.14`, or `3.14t` on a free-threaded interpreter, so that skips can name either."""
    import sysconfig
    threaded = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    return f"{sys.version_info[0]}.{sys.version_info[1]}{threaded}"


def gil_enabled_after_import(python: str, cwd: Path) -> bool:
    """Whether `import torch` leaves the GIL on, asked of a fresh `python` (run in `cwd`, never
    the source root, whose torch/ would shadow the package). On a free-threaded interpreter an
    extension that does not declare Py_mod_gil turns the GIL back on for the whole process;
    upstream's libtorch_python declares it (PyUnstable_Module_SetGIL), so must ours."""
    proc = subprocess.run([python, "-c", "import sys, torch; print(sys._is_gil_enabled())"],
                          capture_output=True, text=True, cwd=str(cwd))
    if proc.returncode != 0:
        raise SelectionError(f"import torch failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return proc.stdout.strip().splitlines()[-1] != "False"


def gpu_present(backend: str) -> bool:
    """Whether the machine has a GPU of the variant's kind (the driver and device node)."""
    if backend == "cuda":
        smi = shutil.which("nvidia-smi")
        return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0
    if backend == "rocm":
        return Path("/dev/kfd").exists()
    return False


def applies(entry: Mapping[str, Any], facts: Mapping[str, Any]) -> bool:
    when = entry.get("when") or {}
    unknown = set(when) - set(CONDITIONS)
    if unknown:
        raise SelectionError(f"selection entry {entry.get('path') or entry.get('test')!r} has "
                             f"unknown condition(s) {sorted(unknown)}; use {', '.join(CONDITIONS)}")
    for key, wanted in when.items():
        if key == "gpu_present":
            if bool(wanted) != bool(facts["gpu_present"]):
                return False
        elif str(facts[key]) not in [str(w) for w in wanted]:
            return False
    return True


def pytest_command(selection: Mapping[str, Any], facts: Mapping[str, Any], tests_dir: Path,
                   extra: list[str]) -> list[str]:
    """The pytest command line for these facts (a SelectionError for a bad selection or tree)."""
    for skip in selection.get("skips", []):
        if not skip.get("why"):
            raise SelectionError(f"skip {skip.get('test')!r} has no 'why'; every skip says why")
    files = [f["path"] for f in selection.get("files", []) if applies(f, facts)]
    root = tests_dir.parent
    missing = [f for f in files if not (root / f).is_file()]
    if missing:
        raise SelectionError(f"{len(missing)} selected test file(s) missing under {root} (first: "
                             f"{missing[0]}); the pytorch-tests output needs test/ from the source "
                             "tarball (source_files)")
    skips = [s["test"] for s in selection.get("skips", []) if applies(s, facts)]
    # run from inside test/, never from the source root: `python -m pytest` puts the working
    # directory on sys.path, and the source tree's torch/ (no compiled _C) would shadow the
    # installed package
    relative = [os.path.relpath(root / f, tests_dir) for f in files]
    command = [sys.executable, "-m", "pytest", *relative, "-p", "no:cacheprovider", "-rfE",
               "--durations=20"]
    if selection.get("markers"):
        command += ["-m", selection["markers"]]
    if skips:
        command += ["-k", "not (" + " or ".join(f"({s})" for s in skips) + ")"]
    return command + extra


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests-dir", type=Path, required=True, help="PyTorch's test/ folder")
    parser.add_argument("--platform", required=True, help="conda subdir, e.g. linux-64")
    parser.add_argument("--gpu-backend", required=True, choices=("cpu", "cuda", "rocm"))
    parser.add_argument("--blas", required=True, choices=("mkl", "generic"))
    parser.add_argument("--selection", type=Path, default=SELECTION, help=argparse.SUPPRESS)
    parser.add_argument("--dry-run", action="store_true", help="print the pytest command only")
    args, extra = parser.parse_known_args(argv)
    facts = {"platform": args.platform, "gpu_backend": args.gpu_backend, "blas": args.blas,
             "python": python_label(),
             "gpu_present": gpu_present(args.gpu_backend)}
    try:
        selection = json.loads(args.selection.read_text())
        command = pytest_command(selection, facts, args.tests_dir.resolve(), extra)
    except (OSError, ValueError, SelectionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"pytorch-tests: {facts['platform']} {facts['gpu_backend']} {facts['blas']} "
          f"python {facts['python']} on {host.machine()}, GPU present: "
          f"{'yes' if facts['gpu_present'] else 'no (GPU tests are not instantiated)'}", flush=True)
    print("pytorch-tests: " + " ".join(command), flush=True)
    if args.dry_run:
        return 0
    if facts["python"].endswith("t"):
        try:
            gil = gil_enabled_after_import(sys.executable, args.tests_dir.resolve())
        except SelectionError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        if gil:
            print("error: import torch turned the GIL back on in this free-threaded Python (an "
                  "extension it loads does not declare Py_mod_gil); free-threaded users would "
                  "silently run with the GIL", file=sys.stderr)
            return 1
        print("pytorch-tests: free-threaded: import torch leaves the GIL off", flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "4"))
    return subprocess.run(command, cwd=str(args.tests_dir.resolve()), env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
