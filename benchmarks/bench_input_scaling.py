#!/usr/bin/env python3
"""Benchmark: every reader's time against the size of a hostile input (issue 49, part 1).

Each reader runs, as a user runs it, on a scratch copy of the feedstock whose input holds a
hostile line at 1x, 4x and 16x its size; the slope of log(time) over log(size) between 1x and
16x says how the time grows (1: linear; the selector scan was 2 or more). The inputs:

  - recipe/meta.yaml: the top-level `summary:` line followed by ' # [a](b)' repeated (a comment
    for YAML; every `[` once walked back for every `#`), and `dev_url:` followed by blanks and
    '# [a](b)' (every cut of the line once skipped the blanks again): 18 KB at 1x;
  - the source url line followed by 16 KB of blanks and a character (the url pattern retried every
    length of its value), for build-locally --dry-run --source-tarball;
  - --filter '(\\w+\\w+)+Z' behind an alternation that grows with the size (it backtracks without
    end: the bound stops it).

Each size runs --repeat times (the best counts; the smallest size once more before, untimed).
The readers: render, rerender --check, lint, parity, build-locally --dry-run, the url check and
--filter. Target: every slope at most 1.3, every read under 10 s, the largest input under the
caps (common/input_files.MAX_INPUT_BYTES, bounded_search.MAX_PATTERN).

    .venv/bin/python benchmarks/bench_input_scaling.py [--scales 1,4,16] [--only lint]
"""
from __future__ import annotations

import argparse
import hashlib
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common.input_files import MAX_INPUT_BYTES  # noqa: E402
from localbuild.bounded_search import MAX_PATTERN  # noqa: E402
from tests.support.feedstock_copy import copy_feedstock  # noqa: E402

CPU_CONFIG = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
# the feedstock tools too: build-locally's dry run renders the outputs with the ones beside it
TREE = ("recipe", "pinning.yaml", "conda-forge.yml", "ci-runners.yml", ".ci_support", ".github",
        "build-locally.py", "localbuild", "common", "feedstock")
MAX_SLOPE = 1.3
MAX_SECONDS = 10.0
BASE_BYTES = 18_000   # 1x: the size at which the selector line took 2.1 s


@dataclass(frozen=True)
class Reader:
    name: str
    input: str                  # which hostile tree it reads: "selectors", "url" or "filter"
    argv: tuple[str, ...]       # after the program; {tarball} and {pattern} are filled in
    feedstock: bool = True      # python -m feedstock, else build-locally.py
    codes: tuple[int, ...] = (0,)  # the exit statuses that are its correct answer


READERS = (
    Reader("render", "selectors", ("render", CPU_CONFIG)),
    Reader("rerender --check", "selectors", ("rerender", "--check")),
    Reader("lint", "selectors", ("lint",)),
    Reader("parity", "selectors", ("parity",)),
    Reader("build-locally --dry-run", "selectors", ("--dry-run", CPU_CONFIG, "--min-free-gb", "0"), feedstock=False),
    Reader("url check (--source-tarball)", "url",
           ("--dry-run", CPU_CONFIG, "--min-free-gb", "0", "--source-tarball", "{tarball}"), feedstock=False),
    # the bound ends it: one error line, exit 2
    Reader("--filter", "filter", ("--list", "--filter", "{pattern}"), feedstock=False, codes=(2,)),
)


def hostile_selectors(tree: Path, scale: int) -> int:
    """meta.yaml with both hostile selector lines, BASE_BYTES x scale in all; the bytes added."""
    meta = tree / "recipe" / "meta.yaml"
    text = meta.read_text()
    reps = BASE_BYTES * scale // 2 // len(" # [a](b)")
    summary = "\n  summary: PyTorch built from source"
    dev_url = "\n  dev_url: https://github.com/pytorch/pytorch"
    assert summary in text and dev_url in text, "the recipe's about: section changed; adapt the benchmark"
    text = text.replace(summary, summary + " # [a](b)" * reps, 1)
    text = text.replace(dev_url, dev_url + " " * (BASE_BYTES * scale // 2) + "# [a](b)", 1)
    meta.write_text(text)
    return reps * len(" # [a](b)") + BASE_BYTES * scale // 2


def hostile_url(tree: Path, scale: int, tarball: Path) -> int:
    """The recipe's source url followed by blanks and a character, its sha256 the tarball's."""
    meta = tree / "recipe" / "meta.yaml"
    lines = meta.read_text().splitlines()
    blanks = 16_000 * scale
    for index, line in enumerate(lines):
        if line.startswith("  url: "):
            lines[index] = line + " " * blanks + "x"
        elif line.startswith("  sha256: "):
            lines[index] = "  sha256: " + hashlib.sha256(tarball.read_bytes()).hexdigest()
            break
    meta.write_text("\n".join(lines) + "\n")
    return blanks


def hostile_pattern(scale: int) -> str:
    """An alternation of names that match nothing, then a pattern that backtracks without end."""
    names = "|".join(f"no_such_config_{i}" for i in range(3 * scale))
    return f"(?:{names})|(\\w+\\w+)+Z"


def run(reader: Reader, tree: Path, fill: dict[str, str]) -> tuple[float, int, str]:
    argv = [arg.format(**fill) if "{" in arg else arg for arg in reader.argv]
    if reader.feedstock:
        command = [sys.executable, "-m", "feedstock", "--feedstock-root", str(tree), *argv]
        cwd = ROOT
    else:
        command = [sys.executable, str(tree / "build-locally.py"), *argv]
        cwd = tree
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          errors="replace", timeout=600)
    seconds = time.perf_counter() - started
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error:")]
    return seconds, proc.returncode, errors[0] if errors else ""


def slope(sizes: list[int], times: list[float]) -> float:
    """log-log slope from the first to the last point."""
    return math.log(times[-1] / times[0]) / math.log(sizes[-1] / sizes[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1,4,16", help="sizes, as multiples of the 1x input (default 1,4,16)")
    parser.add_argument("--only", default="", help="only the readers whose name contains this")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per size, the best counts (default 2)")
    args = parser.parse_args()
    try:
        scales = sorted({int(s) for s in args.scales.split(",")})
    except ValueError:
        parser.error("--scales takes whole numbers, e.g. 1,4,16")
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    if len(scales) < 2 or scales[0] < 1:
        parser.error("--scales needs two sizes or more, each 1 or more")
    readers = [r for r in READERS if args.only in r.name]
    if not readers:
        print(f"error: no reader matches {args.only!r}", file=sys.stderr)
        return 2
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-input-scaling-") as scratch_name:
        scratch = Path(scratch_name)
        tarball = scratch / "pytorch-source.tar.gz"
        tarball.write_bytes(b"not really a tarball: only its sha256 is read\n")
        for reader in readers:
            sizes, times = [], []
            for scale in scales:
                tree = copy_feedstock(scratch / f"tree-{scale}", TREE)
                fill = {"tarball": str(tarball), "pattern": hostile_pattern(scale)}
                if reader.input == "selectors":
                    size = hostile_selectors(tree, scale)
                elif reader.input == "url":
                    size = hostile_url(tree, scale, tarball)
                else:
                    size = len(fill["pattern"])
                if scale == scales[0]:
                    run(reader, tree, fill)   # a first, untimed run: cold caches of the machine
                # the best of --repeat runs: other work on the machine only ever adds time
                seconds, code, error = min(run(reader, tree, fill) for _ in range(args.repeat))
                shutil.rmtree(tree)
                sizes.append(size)
                times.append(seconds)
                what = f"exit {code}" + (f" ({error[:100]})" if error else "")
                print(f"{reader.name}: {scale:>2}x ({size / 1000:.0f} KB) {seconds:6.2f} s, {what}", flush=True)
                if code not in reader.codes:
                    failures.append(f"{reader.name} at {scale}x: exit {code}")
                if seconds >= MAX_SECONDS:
                    failures.append(f"{reader.name} at {scale}x: {seconds:.1f} s")
            cap = MAX_PATTERN if reader.input == "filter" else MAX_INPUT_BYTES
            if sizes[-1] >= cap:
                failures.append(f"{reader.name}: the largest input ({sizes[-1]}) is over the cap ({cap})")
            rise = slope(sizes, times)
            print(f"{reader.name}: slope {rise:.2f} from {scales[0]}x to {scales[-1]}x "
                  f"({times[0]:.2f} s -> {times[-1]:.2f} s)", flush=True)
            if rise > MAX_SLOPE:
                failures.append(f"{reader.name}: slope {rise:.2f}")
    verdict = "OK" if not failures else "FAILED: " + "; ".join(failures)
    print(f"summary: {len(readers)} readers at {', '.join(f'{s}x' for s in scales)} of a hostile input, "
          f"target slope <= {MAX_SLOPE} and each read < {MAX_SECONDS:.0f} s: {verdict}")
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
