#!/usr/bin/env python3
"""The bad-input corpus: every command of the feedstock, fed broken files and bad option values.

Every `python -m feedstock` subcommand and `build-locally.py` with its main options run in a
scratch copy of the feedstock, once per case. A case breaks one file the command reads (a
non-UTF-8 byte, a BOM, CRLF line ends, an empty file, truncated YAML, binary junk, a folder
where the file belongs, an unreadable file, a symlink loop, an unknown key, an unknown
selector, a duplicated key) or gives one bad option value. Each case must end in

  - exit 2 (bad input) or 3 (environment), with exactly one `error:` line and no traceback, or,
    for a change that means the same thing (a BOM, CRLF line ends), the clean run's exit status
    and output;
  - the scratch tree byte for byte as it was before the command ran (an input is never
    modified, nothing is left half-written).

Issue 49's classes: blocking files (a link into /proc or /sys where a file belongs: S_ISREG,
and /proc/kmsg blocks once drained), expression depth (a selector of 3000 `not `s, JSON and TOML
past the depth limit), path kinds (a folder that is a file, a loop or holds an 80 MiB stray; a
path argument that is a file, a device, a loop or a /proc place; a NUL byte in a value), and
locale: a representative part of the corpus (every bad option value, every file's non-UTF-8
breakage and, in YAML, a non-ASCII comment) again under LC_ALL=C PYTHONUTF8=0 from a scratch
folder whose name is not ASCII (the whole corpus twice would double its time for the same roads).

The signals class stops every command with SIGTERM halfway through its run (a scheduler's or a
CI timeout's way to stop it): it must end within 15 s, with one `error:` line and exit 130 (or
die of the signal before its handler was set, or end as its full run does), no traceback, and
every file it changed must be as its full run leaves it (nothing half-written, no temporary
file left).

The lifecycle class kills every long command, and a native and a --develop build (stand-ins
for conda-build and py-rattler's Python), with SIGKILL or SIGHUP at a moment drawn per case: a
hung-up command ends as an interrupt (129 or 130 and one line, or by the hangup itself); 10 s
after the command died no process it started may run (an orphan: found by a variable every
process it starts inherits), and a second run with --no-wait right after a killed build must
not start a build beside one that still runs (a second build).

Every case runs under a 4 GiB memory cap (RLIMIT_DATA) and a time limit: a case killed by its
limit is a hang, one that dies of a signal a crash. Prints one line per failing case and ends with
`bad inputs: N tried, T tracebacks, C trees changed, H hangs, K crashes, O orphans` (and second
builds and other failures, if any); exit 1
when any case failed. Adding a command or an input file is adding rows to CASES below.

    python3 benchmarks/bad_inputs.py            # the whole corpus (about 3 minutes on 2 cores)
    python3 benchmarks/bad_inputs.py -k rerender --verbose
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import io
import json
import os
import random
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.build_locally import install_fake_conda  # noqa: E402
from tests.support.fake_conda_package import write_metadata_package  # noqa: E402
from tests.support.feedstock_copy import copy_feedstock  # noqa: E402

# what the commands read: the feedstock's inputs and build-locally's own tree
TREE = ("recipe", "pinning.yaml", "conda-forge.yml", "ci-runners.yml", ".ci_support", ".github",
        "build-locally.py", "localbuild", "common")
CPU_CONFIG = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"
CUDA_CONFIG = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_version12.9gpu_backendcudarocm_versionNone"
EMPTY_REPODATA = '{"info": {"subdir": "%s"}, "packages": {}, "packages.conda": {}, "repodata_version": 1}\n'


# --- the breakages -------------------------------------------------------------------------

# every case runs under this much memory (the acceptance's 4 GB) and a time limit (--timeout)
MEMORY_CAP = 4 << 30


def _non_utf8(data: bytes) -> bytes:
    cut = data.find(b"\n", len(data) // 2) + 1
    return data[:cut] + b"# caf\xe9 \xff\n" + data[cut:]


def _truncated(data: bytes) -> bytes:
    # cut mid-file, inside a flow sequence: what an interrupted copy of a YAML file looks like
    cut = data.find(b"\n", len(data) // 2) + 1
    return data[:cut] + b"zz_cut_here: [a, b"


def _unknown_key(data: bytes) -> bytes:
    return data.rstrip(b"\n") + b"\nzz_unknown_key: 1\n"


def _unknown_selector(data: bytes) -> bytes | None:
    new, count = re.subn(rb"# \[[^\]\n]+\]", b"# [x86_65]", data, count=1)
    return new if count else None


def _duplicated_key(data: bytes) -> bytes | None:
    # the first top-level key again, at the end, with another value
    match = re.search(rb"^([A-Za-z_][\w.-]*):", data, re.M)
    if not match:
        return None
    return data.rstrip(b"\n") + b"\n" + match.group(1) + b": duplicated\n"


def _deep(data: bytes) -> bytes:
    # 100000 levels of flow nesting: PyYAML's C loader overflowed its stack (SIGSEGV, no output)
    return data.rstrip(b"\n") + b"\nzz_deep: " + b"[" * 100_000 + b"]" * 100_000 + b"\n"


def _aliases(data: bytes) -> bytes:
    # a "billion laughs": nine levels of nine aliases each, 9^9 values once expanded
    names = [bytes([c]) for c in b"abcdefghi"]
    laughs = b"".join(b"zz_%s: &zz_%s [%s]\n" % (name, name, b", ".join([b"*zz_" + prev] * 9 if prev else [b"x"] * 9))
                      for prev, name in zip([b"", *names], names))
    return data.rstrip(b"\n") + b"\n" + laughs


def _wide_matrix(data: bytes) -> bytes:
    # nine unused variant keys of nine plain values: 9^9 variants, rendering them ran forever
    keys = b"".join(b"zz_wide_%d:\n" % key + b"".join(b"  - v%d\n" % value for value in range(9))
                    for key in range(9))
    return data.rstrip(b"\n") + b"\n" + keys


def _bad_shape(data: bytes) -> bytes | None:
    # a setting of conda-forge.yml in a shape conda-smithy's schema refuses: a nested list
    new, count = re.subn(rb"^(\s+pkg_format:).*$", rb"\1 [[2]]", data, count=1, flags=re.M)
    return new if count else None


CONTENT: dict[str, Callable[[bytes], bytes | None]] = {
    "non-utf8": _non_utf8,
    "bom": lambda data: b"\xef\xbb\xbf" + data,
    "crlf": lambda data: data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "empty": lambda data: b"",
    "truncated": _truncated,
    "binary": lambda data: bytes(range(256)) * 8,
    "unknown-key": _unknown_key,
    "unknown-selector": _unknown_selector,
    "duplicated-key": _duplicated_key,
    "deep": _deep,
    "aliases": _aliases,
    "wide-matrix": _wide_matrix,
    "bad-shape": _bad_shape,
}
# what the file is rather than what it holds: a FIFO would block a reader forever, a device
# (/dev/zero behind a symlink) feed it until memory runs out
SHAPE = ("folder", "unreadable", "symlink-loop", "fifo", "device")
SAME_MEANING = ("bom", "crlf", "non-ascii")       # may be accepted, if the result is the clean run's
# (file, breakage) that may be accepted when the result is the clean run's, and why
ACCEPTED = {
    # conda-build reads a variant key nobody uses and ignores it: pinning files carry hundreds
    ("recipe/conda_build_config.yaml", "unknown-key"): "an unused variant key",
    ("pinning.yaml", "unknown-key"): "an unused variant key",
    (f".ci_support/{CPU_CONFIG}.yaml", "unknown-key"): "an unused variant key",
    (".ci_support", "huge-stray"): "a stray file the command does not read (it names one config)",
}
# lint's own business: a broken selector, or a job file that is not what rerender writes
# (stale, whatever is wrong with it), is a finding (exit 1), not an error
FINDINGS = {("feedstock lint", "recipe/conda_build_config.yaml", "unknown-selector"),
            ("feedstock lint", "recipe/conda_build_config.yaml", "deep-selector"),
            ("feedstock lint", "recipe/meta.yaml", "deep-selector"),
            ("feedstock lint", "recipe/conda_build_config.yaml", "wide-matrix"),
            ("feedstock lint", f".ci_support/{CPU_CONFIG}.yaml", None),
            # against the corpus's stand-in source no patch applies: exit 1 is the answer
            ("feedstock patches check", None, None),
            # render --batch: a config that cannot render is its entry's error line (named on
            # stderr too) and exit 1, the other configs rendered; only a bad batch is exit 2
            ("feedstock render --batch", f".ci_support/{CPU_CONFIG}.yaml", None)}
ALL_BREAKAGES = (*CONTENT, *SHAPE)
YAML_BREAKAGES = ALL_BREAKAGES
TEXT_BREAKAGES = tuple(b for b in ALL_BREAKAGES if b not in ("unknown-key", "duplicated-key",
                                                             "unknown-selector", "truncated", "deep", "aliases",
                                                             "wide-matrix", "bad-shape"))


# issue 49: breakages of the second round, tried where each applies (not on every file)
def _deep_selector(data: bytes) -> bytes:
    # compile() recursed once per `not `: RecursionError, caught by nobody
    return data.rstrip(b"\n") + b"\nzz_deep_selector: 1  # [" + b"not " * 3000 + b"linux]\n"


def _nul_value(data: bytes) -> bytes | None:
    # a NUL byte inside a value (a job file's docker_image): it reached subprocess (ValueError)
    match = re.search(rb"docker_image:\s*\n-\s*[^\n]{3}", data)
    return data[:match.end()] + b"\0" + data[match.end():] if match else None


ROUND_TWO: dict[str, Callable[[bytes], bytes | None]] = {
    "deep-selector": _deep_selector,                                  # expression depth
    "deep-json": lambda data: b"[" * 5000 + b"]" * 5000 + b"\n",      # valid JSON, 5000 deep
    "deep-toml": lambda data: data + b"zz_deep = " + b"[" * 600 + b"]" * 600 + b"\n",
    "nul-value": _nul_value,                                          # path kinds' NUL
    # locale: a comment that is not ASCII means the same thing, in any locale
    "non-ascii": lambda data: data.rstrip(b"\n") + "\n# caf\u00e9 \u2014 \u00fcn\u00efcode\n".encode(),
}
# blocking files: S_ISREG and still no file to read; refused by where they are. /proc/kmsg
# blocks once drained (and a read consumes it); the others end, but come from the same places
PLACES = {"proc-file": "/proc/self/status", "blocking": "/proc/kmsg", "sys-file": "/sys/devices/system/cpu/online"}
# path kinds of an input folder: a file or a symlink loop where it belongs, a huge stray file in it
FOLDER_KINDS = ("file-for-folder", "folder-loop", "huge-stray")
STRAY_BYTES = 80 << 20   # over the 64 MiB cap; sparse, so it costs no disk


def break_file(path: Path, how: str) -> bool:
    """Apply one breakage to path (which exists); False where it does not apply."""
    if how in SIZE_SLOPES:
        new = SIZE_SLOPES[how](path.read_bytes())
        if new is None:
            return False
        path.write_bytes(new)
        return True
    if how in PLACES:
        if not os.path.exists(PLACES[how]):
            return False
        path.unlink()
        path.symlink_to(PLACES[how])
    elif how == "file-for-folder":
        shutil.rmtree(path)
        path.write_text("a file where a folder belongs\n")
    elif how == "folder-loop":
        shutil.rmtree(path)
        path.symlink_to(path.name)
    elif how == "huge-stray":
        with open(path / "zz_stray.yaml", "wb") as stray:
            stray.truncate(STRAY_BYTES)
    elif how in CONTENT or how in ROUND_TWO:
        new = (CONTENT.get(how) or ROUND_TWO[how])(path.read_bytes())
        if new is None:
            return False
        path.write_bytes(new)
    elif how == "folder":
        path.unlink()
        path.mkdir()
        (path / "inside.txt").write_text("a folder where a file belongs\n")
    elif how == "unreadable":
        if os.geteuid() == 0:
            return False  # root reads every file whatever its mode
        path.chmod(0)
    elif how == "symlink-loop":
        path.unlink()
        path.symlink_to(path.name)
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif how == "device":
        path.unlink()
        path.symlink_to("/dev/zero")
    return True


# --- size slopes (issue 49, part 1) ------------------------------------------------------------
# Inputs whose reading took time that grew faster than their size: a selector scan that retried
# every cut of a line (72 KB of ' # [a](b)' after a value: 55 s), a url pattern that retried
# every length of its value before trailing blanks, a user's --filter that backtracks without
# end. Each case must end within SIZE_BOUND_S, with one error line or the clean run's result.
SIZE_BOUND_S = 30.0
SIZE_BYTES = 72_000


def _size_line(data: bytes) -> re.Match | None:
    # the top-level summary of a recipe, else the first top-level key without a value or comment
    return (re.search(rb"^  summary: [^\n#]*$", data, re.M)
            or re.search(rb"^[A-Za-z_][\w.-]*:[ \t]*$", data, re.M))


def _after_line(data: bytes, match: re.Match | None, tail: bytes) -> bytes | None:
    return data[:match.end()] + tail + data[match.end():] if match else None


SIZE_SLOPES: dict[str, Callable[[bytes], bytes | None]] = {
    # a comment of markdown links: every `[` once walked back for every `#`
    "size-selector-line": lambda data: _after_line(data, _size_line(data), b" # [a](b)" * (SIZE_BYTES // 9)),
    # blanks before a comment: every cut of the line once skipped them again
    "size-blank-line": lambda data: _after_line(data, _size_line(data), b" " * SIZE_BYTES + b"# [a](b)"),
    # blanks and a character after the source url: the url pattern retried every length
    "size-url-blanks": lambda data: _after_line(data, re.search(rb"^  url: [^\n]*$", data, re.M),
                                                b" " * SIZE_BYTES + b"x"),
}
# a comment, however long, means the same thing: the clean run's result is the answer
SAME_MEANING = (*SAME_MEANING, "size-selector-line", "size-blank-line")
SIZE_FILTERS = (r"(\w+\w+)+Z", r"(\w|\w)*Z", "x" * 1001)   # two that backtrack without end, one too long


def size_slope_cases(dry: tuple[str, ...]) -> list[Case]:
    """Every reader of the recipe and its variants on the size class; --filter's bound."""
    cbc, meta, rattler = "recipe/conda_build_config.yaml", "recipe/meta.yaml", "recipe/recipe.yaml"
    lines = ("size-selector-line", "size-blank-line")
    cases: list[Case] = []
    for command, argv in (("feedstock render", ("render", CPU_CONFIG)), ("feedstock rerender --check", ("rerender", "--check")),
                          ("feedstock lint", ("lint",))):
        cases += _files(command, argv, {meta: lines, cbc: lines})
    cases += _files("feedstock parity", ("parity",), {meta: lines})
    cases += _files("build-locally --dry-run", dry, {meta: lines, cbc: lines}, feedstock=False)
    tarball = (*dry, "--source-tarball", "{work}/torch.whl")
    cases += _files("build-locally --dry-run --source-tarball", tarball, {meta: (*lines, "size-url-blanks")},
                    feedstock=False)
    cases += _files("build-locally --dry-run --tool rattler-build --source-tarball", (*tarball, "--tool", "rattler-build"),
                    {rattler: ("size-url-blanks",)}, feedstock=False)
    cases += _options("build-locally size-slope", [argv for pattern in SIZE_FILTERS for argv in
                                                   (("--all", "--filter", pattern), ("--list", "--filter", pattern),
                                                    (*dry[:1], "--all", "--filter", pattern))], feedstock=False)
    return cases


def _time_bound(case: Case, timeout: float) -> float:
    """The size class ends well within the corpus's time limit, or counts as a hang."""
    sized = case.how in SIZE_SLOPES or case.command.endswith("size-slope")
    return min(timeout, SIZE_BOUND_S) if sized else timeout


# --- the cases -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    command: str                    # label: "feedstock rerender", "build-locally --dry-run"
    argv: tuple[str, ...]           # after the program; {tree} and {work} are filled in
    target: str | None = None       # the file broken, relative to the tree
    how: str | None = None          # the breakage, or None for a bad option value
    feedstock: bool = True          # python -m feedstock (else build-locally.py)
    signal_at: float | None = None  # SIGTERM at this fraction of the clean run's time
    locale: bool = False            # under LC_ALL=C PYTHONUTF8=0, from a non-ASCII folder
    kill_with: int | None = None    # the lifecycle class: this signal (not SIGTERM) at signal_at

    @property
    def name(self) -> str:
        what = f"{self.target} {self.how}" if self.target else " ".join(self.argv)
        if self.signal_at is not None:
            sent = signal.Signals(self.kill_with).name if self.kill_with else "SIGTERM"
            what += f", {sent} at {self.signal_at:.0%} of its run"
        if self.locale:
            what += ", LC_ALL=C from a non-ASCII folder"
        return f"{self.command}: {what}"


@dataclass
class Result:
    case: Case
    code: int
    output: str
    changed: list[str] = field(default_factory=list)
    problem: str = ""               # "" when the case passed
    traceback: bool = False
    orphans: list[str] = field(default_factory=list)   # the lifecycle class: alive 10 s after
    second_builds: int = 0          # builds started beside a running one in the same folder


def _files(command: str, argv: tuple[str, ...], targets: dict[str, tuple[str, ...]],
           feedstock: bool = True) -> list[Case]:
    return [Case(command, argv, target, how, feedstock)
            for target, breakages in targets.items() for how in breakages]


def _options(command: str, argvs: list[tuple[str, ...]], feedstock: bool) -> list[Case]:
    return [Case(command, argv, feedstock=feedstock) for argv in argvs]


def all_cases() -> list[Case]:
    cbc, meta, rattler = "recipe/conda_build_config.yaml", "recipe/meta.yaml", "recipe/recipe.yaml"
    job = f".ci_support/{CPU_CONFIG}.yaml"
    cases: list[Case] = []
    cases += _files("feedstock rerender", ("rerender",), {
        cbc: YAML_BREAKAGES, "conda-forge.yml": YAML_BREAKAGES, "ci-runners.yml": YAML_BREAKAGES,
        "pinning.yaml": YAML_BREAKAGES, meta: YAML_BREAKAGES})
    cases += _files("feedstock rerender --check", ("rerender", "--check"), {
        cbc: ("non-utf8", "unknown-selector", "folder", "wide-matrix"),
        "conda-forge.yml": ("non-utf8", "unknown-key", "bad-shape")})
    cases += _files("feedstock render", ("render", CPU_CONFIG), {job: YAML_BREAKAGES, meta: YAML_BREAKAGES})
    batch = ("render", "--batch", "{work}/batch.json")
    cases += _files("feedstock render --batch", batch, {"{work}/batch.json": YAML_BREAKAGES,
                                                        job: ("non-utf8", "empty", "truncated", "folder")})
    cases += _files("feedstock lint", ("lint",), {
        "recipe/dependents.yaml": ("non-utf8", "empty", "truncated", "binary", "folder"),
        cbc: ("non-utf8", "binary", "folder", "symlink-loop", "unknown-selector", "wide-matrix"),
        "conda-forge.yml": ("non-utf8", "unknown-key", "truncated", "bad-shape"),
        job: ("non-utf8", "empty", "folder")})
    cases += _files("feedstock parity", ("parity",), {
        rattler: ("non-utf8", "empty", "truncated", "binary", "folder", "symlink-loop"),
        meta: ("non-utf8", "folder")})
    cases += _files("feedstock deps", ("deps", "--repodata", "{work}/repodata.json"),
                    {"{work}/repodata.json": YAML_BREAKAGES})
    cases += _files("feedstock deps", ("deps", "--wheel", "{work}/torch.whl"),
                    {"{work}/torch.whl": ("empty", "binary", "folder", "symlink-loop", "non-utf8")})
    cases += _files("feedstock bump", ("bump", "9.9.9", "--source", "{work}/source", "--skip-patch-check"), {
        meta: YAML_BREAKAGES, rattler: ("non-utf8", "folder", "symlink-loop", "empty", "binary")})
    cases += _files("feedstock patches check", ("patches", "check", "--source", "{work}/source"), {
        meta: ("non-utf8", "folder", "empty", "binary", "symlink-loop"),
        "recipe/patches/0001-cpp_extension-find-conda-CUDA-target-directory.patch": TEXT_BREAKAGES})
    cases += _files("feedstock downstream", ("downstream", "--catalog", "{work}/catalog.yaml",
                                             "--channel", "{work}/channel", "--work", "{work}/dswork"),
                    {"{work}/catalog.yaml": YAML_BREAKAGES})
    cases += _files("feedstock downstream", ("downstream", "--channel", "{work}/channel",
                                             "--work", "{work}/dswork"),
                    {"{work}/channel/noarch/repodata.json": YAML_BREAKAGES,
                     "recipe/dependents.yaml": YAML_BREAKAGES})
    image = ("image", "--channel", "{work}/channel", "--flavour", "cpu", "--python", "3.12",
             "--output", "{work}/image-out")
    cases += _files("feedstock image", (*image, "--requirements", "{work}/requirements.txt"),
                    {"{work}/requirements.txt": TEXT_BREAKAGES})
    envfile = ("image", "--environment", "{work}/env.yml", "--output", "{work}/image-out")
    cases += _files("feedstock image --environment", envfile, {"{work}/env.yml": YAML_BREAKAGES})
    cases += _files("feedstock image", image, {"{work}/channel/noarch/repodata.json": YAML_BREAKAGES,
                                               "{work}/channel/linux-64/repodata.json": ("non-utf8", "binary", "truncated")})
    cases += _options("feedstock", [
        ("render", "no_such_config"), ("render", "../../etc/passwd"), ("render", ""), ("render",),
        ("render", "--batch", "{work}/nowhere.json"), ("render", "--batch", "-"),
        ("render", "--batch", "{work}/requirements.txt"), ("render", "--batch", "{work}/env.yml"),
        ("render", "--batch", "{work}/badbatch.json"), ("render", CPU_CONFIG, "--batch", "{work}/batch.json"),
        ("bump", "not-a-version", "--source", "{work}/source"),
        ("bump", "9.9.9", "--source", "{work}/nowhere"),
        ("bump", "9.9.9", "--source", "{work}/source", "--sha256", "xyz"),
        ("bump", "9.9.9", "--source", "{work}/source", "--wheel", "{work}/nowhere.whl"),
        ("deps", "--source", "{work}/nowhere"), ("deps", "--repodata", "{work}/nowhere.json"),
        ("deps", "--format", "xml"),
        ("patches", "check", "--source", "{work}/nowhere"),
        ("patches", "refresh", "--source-git", "{work}/nowhere", "--base", "v1"),
        ("patches", "refresh", "--source-git", "{work}/source", "--base", "v1"),
        ("patches", "frobnicate"),
        ("downstream", "--channel", "{work}/nowhere"), ("downstream", "no_such_dependent"),
        ("downstream", "--variant", "nonsense", "--channel", "{work}/channel"),
        ("downstream", "--env", "cpu", "--channel", "{work}/channel"),
        ("downstream", "--env", "purple={work}/nowhere"),
        ("downstream", "--catalog", "{work}/nowhere.yaml", "--channel", "{work}/channel"),
        # issue 28: --compare against a channel of one pytorch, a torch spec that is no version
        # spec, a source whose sha256 does not match (plain and --matrix), the matrix options
        ("downstream", "--compare", "2.13.0", "2.14.1", "--channel", "{work}/onetorch", "--work", "{work}/dswork"),
        ("downstream", "--compare", "2.13.0", "2.14.1", "--channel", "{work}/onetorch", "--summary", "{work}/env.yml"),
        ("downstream", "--catalog", "{work}/badspec.yaml", "--channel", "{work}/onetorch", "--matrix"),
        ("downstream", "--catalog", "{work}/badsha.yaml", "--channel", "{work}/onetorch", "--cache", "{work}/dscache",
         "--work", "{work}/dswork"),
        ("downstream", "--catalog", "{work}/badsha.yaml", "--channel", "{work}/onetorch", "--cache", "{work}/dscache",
         "--work", "{work}/dswork", "--matrix", "--json", "{work}/m.json", "--summary", "{work}/requirements.txt"),
        ("downstream", "--compare", "2.13.0", "2.13.0", "--channel", "{work}/onetorch"),
        ("downstream", "--compare", "2.13.0", ">=2.14", "--channel", "{work}/onetorch"),
        ("downstream", "--compare", "2.13.0", "--channel", "{work}/onetorch"),
        ("downstream", "--summary", "{work}/s.md", "--channel", "{work}/onetorch"),
        ("downstream", "--matrix", "--summary", "{work}/source", "--channel", "{work}/onetorch"),
        ("downstream", "--compile-cache", "{work}/requirements.txt", "--channel", "{work}/onetorch"),
        ("downstream", "--compile-cache", "{work}/cc", "--no-compile-cache", "--channel", "{work}/onetorch"),
        (*image[:-2], "--output", "{work}/image-out", "--flavour", "cpu"),
        ("image", "--channel", "{work}/channel", "--flavour", "purple", "--python", "3.12", "--output", "{work}/o"),
        ("image", "--channel", "{work}/channel", "--flavour", "cpu", "--python", "2.7", "--output", "{work}/o"),
        ("image", "--channel", "{work}/nowhere", "--flavour", "cpu", "--python", "3.12", "--output", "{work}/o"),
        (*image, "--requirements", "{work}/nowhere.txt"),
        (*image, "--base", "{work}/nowhere.tar"),
        (*image, "--find-links", "{work}/nowhere"),
        (*image, "--cuda", "banana"),
        (*image, "--host-python", "{work}/nowhere/python"),
        ("image", "--environment", "{work}/nowhere.yml", "--output", "{work}/o"),
        (*envfile, "--channel", "{work}/channel"), (*envfile, "--flavour", "gpu"), (*envfile, "--python", "3.10"),
        (*envfile, "--requirements", "{work}/requirements.txt"),
        (*envfile, "--pip-cert", "{work}/nowhere.pem"), (*envfile, "--pip-cert", "{work}/requirements.txt"),
        (*envfile, "--find-links", "{work}/nowhere"),
        (*image, "--requirements", "{work}/requirements.txt", "--pip-cert", "{work}/catalog.yaml"),
        (*image, "--compile-cache", "{work}/requirements.txt"),
        (*image, "--wheel-cache", "{work}/requirements.txt"), (*envfile, "--wheel-cache", "{work}/wc", "--no-wheel-cache"),
        (*envfile, "--compile-cache", "{work}/cc", "--no-compile-cache"),
        ("frobnicate",), ("lint", "--frobnicate"),
    ], feedstock=True)
    # --min-free-gb 0: the dry run's disk verdict follows the free space, which other work changes
    dry = ("--dry-run", CPU_CONFIG, "--min-free-gb", "0")
    cases += _files("build-locally --dry-run", dry, {job: YAML_BREAKAGES}, feedstock=False)
    cases += _files("build-locally --list", ("--list",), {job: ("non-utf8", "empty", "binary", "folder", "symlink-loop",
                                                                "truncated", "duplicated-key")}, feedstock=False)
    cases += _files("build-locally --dry-run --channel", (*dry, "--channel", "{work}/channel"),
                    {"{work}/channel/noarch/repodata.json": ("non-utf8", "binary", "folder", "truncated")},
                    feedstock=False)
    # the recipe's source read for --source-tarball (a scratch file stands for the tarball: its
    # sha256 is not the recipe's, so a clean run ends in that one line too), then the file itself
    tarball = (*dry, "--source-tarball", "{work}/torch.whl")
    cases += _files("build-locally --dry-run --source-tarball", tarball,
                    {meta: ("non-utf8", "bom", "crlf", "empty", "truncated", "binary", "folder", "unreadable",
                            "symlink-loop"),
                     "{work}/torch.whl": ("empty", "binary", "folder", "unreadable", "symlink-loop")},
                    feedstock=False)
    cases += _files("build-locally --dry-run --tool rattler-build --source-tarball", (*tarball, "--tool", "rattler-build"),
                    {rattler: ("non-utf8", "bom", "empty", "binary", "folder", "symlink-loop")}, feedstock=False)
    develop = (*dry, "--develop", "{work}/dtree")
    cases += _files("build-locally --dry-run --develop", develop,
                    {"{work}/dtree/pyproject.toml": ("non-utf8", "binary", "folder", "empty", "truncated",
                                                     "symlink-loop", "unreadable")},
                    feedstock=False)   # (version.txt only informs a note: a broken one is "no version")
    cases += _options("build-locally", [
        (*dry, "--develop", "{work}/nowhere"), (*dry, "--develop", "{work}/requirements.txt"),
        (*dry, "--develop", "{work}/source"), (*dry, "--shell"), ("--all", "--develop", "{work}/dtree"),
        (*develop, "--python", "3.10,3.11"), (*develop, "--python", "3.99"), (*develop, "--tool", "conda-build"),
        (*develop, "--upload"), (*develop, "--source-tarball", "{work}/torch.whl"),
    ], feedstock=False)
    cases += _options("build-locally", [
        ("no_such_config",), ("--all", "--filter", "["), ("--all", "--filter", "matches_nothing"),
        (*dry, "--python", "2.7"), (*dry, "--python", "three"), (CUDA_CONFIG, "--dry-run", "--cuda-arch", "banana"),
        (CUDA_CONFIG, "--dry-run", "--cuda-arch", "1.0"), (*dry, "--rocm-arch", "gfx9999"),
        (*dry, "--cuda-arch", "9.0"), (*dry, "--jobs", "0"), (*dry, "--jobs", "-3"), (*dry, "--heavy-jobs", "x"),
        (*dry, "--dev-tag", "has space"), (*dry, "--compile-cache", "redis://"),
        (*dry, "--compile-cache", "ftp://example.org/cache"), (*dry, "--compile-cache-read-only"),
        (*dry, "--ccache", "{work}/repodata.json"),
        (*dry, "--engine", "docker", "--native"), (CPU_CONFIG, "--engine", "{work}/nowhere/docker"),
        (*dry, "--apptainer-image", "{work}/nowhere.sif"), (*dry, "--tool", "make"),
        (*dry, "--channel", "{work}/nowhere"), (*dry, "--channel", "bad name with spaces"),
        (*dry, "--min-free-gb", "-1"), (*dry, "--min-free-gb", "lots"),
        (*dry, "--scheduler", "pbs"), (*dry, "--partition", "gpu"),
        (*dry, "--scheduler", "slurm", "--time", "forever"), (*dry, "--scheduler", "slurm", "--mem", "lots"),
        (*dry, "--scheduler", "slurm", "--gpus", "-1"), (*dry, "--scheduler", "slurm", "--cpus-per-task", "0"),
        (*dry, "--scheduler", "slurm", "--sbatch-arg", "--array=1-5"),
        (CPU_CONFIG, CUDA_CONFIG, "--debug"), (*dry, "--output-id", "../escape"),
        (*dry, "--upload"), ("--all", "--debug"),
        (*dry, "--source-tarball", "{work}/nowhere.tar.gz"), (*dry, "--source-tarball", "{work}/source"),
        (*dry, "--source-tarball", ""), (*dry, "--source-tarball", "{work}/torch.whl", "--test-only"),
        (CPU_CONFIG, "--source-tarball", "{work}/torch.whl", "--min-free-gb", "0"),
    ], feedstock=False)
    cases += size_slope_cases(dry)
    cases += round_two_cases(dry, image)
    return cases + signal_cases(image, envfile, dry) + lifecycle_cases(image, envfile, dry) + locale_cases(cases)


def round_two_cases(dry: tuple[str, ...], image: tuple[str, ...]) -> list[Case]:
    """Issue 49's classes: blocking files, expression depth, path kinds (locale: locale_cases)."""
    cbc, meta, job = "recipe/conda_build_config.yaml", "recipe/meta.yaml", f".ci_support/{CPU_CONFIG}.yaml"
    places = tuple(PLACES)
    cases: list[Case] = []
    # blocking files: every reader of a file the user gives or keeps, pointed into /proc or /sys
    cases += _files("feedstock rerender", ("rerender",), {meta: places, cbc: places, "pinning.yaml": places,
                                                         ".ci_support": FOLDER_KINDS})
    cases += _files("feedstock render", ("render", CPU_CONFIG), {meta: places, job: places})
    cases += _files("feedstock lint", ("lint",), {meta: places, ".ci_support": FOLDER_KINDS})
    cases += _files("feedstock render --batch", ("render", "--batch", "{work}/batch.json"),
                    {"{work}/batch.json": (*places, "deep-json")})
    cases += _files("feedstock deps", ("deps", "--repodata", "{work}/repodata.json"),
                    {"{work}/repodata.json": (*places, "deep-json")})
    cases += _files("feedstock deps --write-docs", ("deps", "--source", "{work}/source", "--write-docs"),
                    {"docs/maintaining.md": (*places, "non-utf8", "folder")})
    cases += _files("feedstock bump", ("bump", "9.9.9", "--source", "{work}/pytorch-v9.9.9.tar.gz",
                                       "--skip-patch-check", "--dry-run"), {meta: places})
    cases += _files("feedstock image", (*image, "--requirements", "{work}/requirements.txt"),
                    {"{work}/requirements.txt": places})
    # (build-locally --dry-run of a recipe that cannot render is issue 49's part 7: not here yet)
    cases += _files("build-locally --dry-run", dry, {job: (*places, "nul-value"), ".ci_support": FOLDER_KINDS},
                    feedstock=False)
    cases += _files("build-locally --list", ("--list",), {job: places, ".ci_support": FOLDER_KINDS}, feedstock=False)
    cases += _files("build-locally --engine podman", (CPU_CONFIG, "--engine", "podman", "--min-free-gb", "0"),
                    {job: ("nul-value",)}, feedstock=False)
    tarball = (*dry, "--source-tarball", "{work}/torch.whl")
    cases += _files("build-locally --dry-run --source-tarball", tarball, {meta: places, "{work}/torch.whl": places},
                    feedstock=False)
    cases += _files("build-locally --dry-run --develop", (*dry, "--develop", "{work}/dtree"),
                    {"{work}/dtree/pyproject.toml": (*places, "deep-toml")}, feedstock=False)
    cases += _files("build-locally --dry-run --channel", (*dry, "--channel", "{work}/channel"),
                    {"{work}/channel/noarch/repodata.json": ("deep-json", "proc-file")}, feedstock=False)
    # expression depth in the recipe and its variants
    cases += _files("feedstock render", ("render", CPU_CONFIG), {meta: ("deep-selector",), cbc: ("deep-selector",)})
    cases += _files("feedstock rerender", ("rerender",), {meta: ("deep-selector",), cbc: ("deep-selector",)})
    cases += _files("feedstock lint", ("lint",), {meta: ("deep-selector",), cbc: ("deep-selector",)})
    # path kinds: path arguments that are a file, a device, a pseudo-filesystem's place, a loop
    ds = ("downstream", "--channel", "{work}/onetorch")
    cases += _options("feedstock", [
        (*ds, "--work", "{work}/requirements.txt"), (*ds, "--work", "/dev/null"), (*ds, "--work", "/proc/x"),
        (*ds, "--work", "{work}/loop"), (*ds, "--cache", "/proc/self"), (*ds, "--work", "{work}/requirements.txt/x"),
        ("bump", "9.9.9", "--source", "/proc/self"), ("deps", "--source", "/proc/self"),
        ("patches", "check", "--source", "/proc/self"), ("deps", "--repodata", "/proc/self/status"),
        ("render", "--batch", "/proc/self/status"), ("render", "--batch", "{work}/loop"),
        (*image[:-2], "--output", "/dev/null"), (*image[:-2], "--output", "/proc/x"),
        (*image, "--requirements", "/proc/self/status"),
    ], feedstock=True)
    cases += _options("build-locally", [
        (*dry, "--channel", "{work}/loop"), (*dry, "--channel", "/proc/self"), (*dry, "--compile-cache", "/proc/x"),
        (*dry, "--compile-cache", "{work}/loop"), (*dry, "--compile-cache", "/dev/null"),
        (*dry, "--develop", "/proc/self"), (*dry, "--develop", "{work}/loop"),
        (*dry, "--source-tarball", "/proc/self/status"), (*dry, "--source-tarball", "/dev/zero"),
    ], feedstock=False)
    return cases


def locale_cases(cases: list[Case]) -> list[Case]:
    """The locale class: a representative part of the corpus again, under LC_ALL=C PYTHONUTF8=0
    from a non-ASCII folder (the scratch's own name): every bad option value, and for every file
    a case reads, its non-UTF-8 breakage and (YAML) a non-ASCII comment, which means the same
    thing. The whole corpus twice would double its time for the same roads."""
    picked = [case for case in cases if case.target is None]
    targets = sorted({(case.command, case.argv, case.feedstock, case.target) for case in cases
                      if case.target is not None and case.how in ALL_BREAKAGES}, key=repr)
    for command, argv, feedstock, target in targets:
        picked.append(Case(command, argv, target, "non-utf8", feedstock))
        if target.endswith((".yaml", ".yml")):
            picked.append(Case(command, argv, target, "non-ascii", feedstock))
    return [dataclasses.replace(case, locale=True) for case in picked]


# the signals class: every command stopped by SIGTERM (what a scheduler or a CI timeout sends)
# halfway through its run. The commands that write get something to write: a stale job file
# for rerender, a new version for bump.
SIGNAL_AT = (0.5,)


def long_commands(image: tuple[str, ...], envfile: tuple[str, ...], dry: tuple[str, ...]) -> list[tuple]:
    """(label, argv, target, breakage, feedstock) of every command that runs long enough to be
    stopped halfway."""
    job = f".ci_support/{CPU_CONFIG}.yaml"
    return [
        ("feedstock rerender", ("rerender",), job, "unknown-key", True),
        ("feedstock rerender --check", ("rerender", "--check"), None, None, True),
        ("feedstock render", ("render", CPU_CONFIG), None, None, True),
        ("feedstock render --batch", ("render", "--batch", "{work}/batch.json"), None, None, True),
        ("feedstock lint", ("lint",), None, None, True),
        ("feedstock parity", ("parity",), None, None, True),
        ("feedstock deps", ("deps", "--repodata", "{work}/repodata.json"), None, None, True),
        ("feedstock bump", ("bump", "9.9.9", "--source", "{work}/pytorch-v9.9.9.tar.gz", "--skip-patch-check"),
         None, None, True),
        ("feedstock patches check", ("patches", "check", "--source", "{work}/source"), None, None, True),
        ("feedstock downstream", ("downstream", "--channel", "{work}/onetorch", "--work", "{work}/dswork"),
         None, None, True),
        ("feedstock image", (*image, "--requirements", "{work}/requirements.txt"), None, None, True),
        ("feedstock image --environment", envfile, None, None, True),
        ("build-locally --dry-run", dry, None, None, False),
        ("build-locally --list", ("--list",), None, None, False),
        ("build-locally --dry-run --all", ("--dry-run", "--all", "--min-free-gb", "0"), None, None, False),
        ("build-locally --dry-run --source-tarball", (*dry, "--source-tarball", "{work}/torch.whl"),
         None, None, False),
    ]


def signal_cases(image: tuple[str, ...], envfile: tuple[str, ...], dry: tuple[str, ...]) -> list[Case]:
    return [Case(command, argv, target, how, feedstock, at)
            for command, argv, target, how, feedstock in long_commands(image, envfile, dry) for at in SIGNAL_AT]


# the lifecycle class: every long command, and two builds (build-locally --native with a
# stand-in conda-build that compiles for BUILD_SECONDS; --develop with a stand-in for py-rattler's
# Python whose "compiler" runs as long), killed with SIGKILL or hung up at a moment drawn
# per case (the same every run: a failure can be run again). 10 s after the command died no
# process it started may run (an orphan), and right after it a second run with --no-wait must
# not start a build beside one that still runs (a second build).
LIFECYCLE_SIGNALS = (signal.SIGKILL, signal.SIGHUP)
ORPHAN_WAIT = 10.0
RUN_TOKEN = "BAD_INPUTS_RUN"    # set for a case's command: every process it starts inherits it
DIED_OF_HANGUP = 1000 + signal.SIGHUP   # the exit status kept for a death by SIGHUP (-1 is a hang)
BUILD_SECONDS = 8    # the stand-in builds: long enough to be killed halfway, short for the corpus
BUILDS = {"build-locally --native": (CPU_CONFIG, "--native", "--min-free-gb", "0"),
          "build-locally --develop": (CPU_CONFIG, "--develop", "{work}/dtree", "--native", "--min-free-gb", "0")}


def lifecycle_cases(image: tuple[str, ...], envfile: tuple[str, ...], dry: tuple[str, ...]) -> list[Case]:
    runs = [*long_commands(image, envfile, dry),
            *[(label, argv, None, None, False) for label, argv in BUILDS.items()]]
    cases = []
    for command, argv, target, how, feedstock in runs:
        for signum in LIFECYCLE_SIGNALS:
            at = random.Random(f"{command} {signum.name}").uniform(0.1, 0.9)
            cases.append(Case(command, argv, target, how, feedstock, round(at, 2), kill_with=int(signum)))
    return cases


# --- running -------------------------------------------------------------------------------

def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> what it is (file bytes' sha256, link target, or a folder), links not followed."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                found[rel] = "link:" + os.readlink(path)
            elif stat.S_ISDIR(mode):
                found[rel] = "dir"
            elif not stat.S_ISREG(mode):  # a FIFO the corpus made: reading it would block
                found[rel] = f"special:{stat.S_IFMT(mode):o}"
            else:
                try:
                    found[rel] = hashlib.sha256(path.read_bytes()).hexdigest() + f":{stat.S_IMODE(mode):o}"
                except OSError as err:
                    found[rel] = f"unreadable:{err.errno}:{stat.S_IMODE(mode):o}"
    return found


def make_scratch(base: Path) -> tuple[Path, Path]:
    """A copy of the feedstock (tree) and a folder of other inputs (work): a tiny empty channel,
    a catalog, a requirements file, an environment file, a repodata file, a wheel-shaped file, a
    source folder."""
    tree, work = copy_feedstock(base / "tree", TREE), base / "work"
    for subdir in ("noarch", "linux-64"):
        (work / "channel" / subdir).mkdir(parents=True)
        (work / "channel" / subdir / "repodata.json").write_text(EMPTY_REPODATA % subdir)
    shutil.copy2(ROOT / "recipe" / "dependents.yaml", work / "catalog.yaml")
    (work / "requirements.txt").write_text("einops==0.8.1\n")
    (work / "env.yml").write_text(f"channels: [{work / 'channel'}]\ndependencies:\n  - pytorch-cpu\n"
                                  "  - python=3.12\n  - pip:\n    - einops==0.8.1\n"
                                  "    - torch-scatter==2.1.2 --no-build-isolation\n")
    (work / "repodata.json").write_text(EMPTY_REPODATA % "linux-64")
    # render --batch: two configs, one request a line (the breakages cut and insert by lines);
    # a batch whose request sets a variable no environment can hold
    (work / "batch.json").write_text(json.dumps([{"config": CPU_CONFIG}, {"config": CUDA_CONFIG,
                                                  "environment": {"FEEDSTOCK_DEV_TAG": "corpus"}}], indent=1))
    (work / "badbatch.json").write_text(json.dumps([{"config": CPU_CONFIG, "environment": {"A=B": "1"}}]))
    (work / "torch.whl").write_bytes(b"PK\x05\x06" + b"\0" * 18)   # an empty zip
    (work / "source").mkdir()
    (work / "source" / "version.txt").write_text("9.9.9\n")
    # a checkout for --develop: PyTorch 2.14+'s shape (scikit-build-core), another version
    (work / "dtree" / "torch").mkdir(parents=True)
    (work / "dtree" / "CMakeLists.txt").write_text("project(dtree)\n")
    (work / "dtree" / "pyproject.toml").write_text('[build-system]\nbuild-backend = "scikit_build_core.build"\n')
    (work / "dtree" / "version.txt").write_text("2.15.0a0\n")
    (work / "loop").symlink_to("loop")   # path kinds: a symlink loop given as a folder
    (tree / "docs").mkdir()               # deps --write-docs's page
    shutil.copy2(ROOT / "docs" / "maintaining.md", tree / "docs" / "maintaining.md")
    # a release tarball for bump to take (the signals class stops a bump that writes)
    # (the same bytes in every scratch: its sha256 goes into the recipe a finished run is compared with)
    with gzip.GzipFile(work / "pytorch-v9.9.9.tar.gz", "wb", mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w") as tar:
        data = b"9.9.9\n"
        info = tarfile.TarInfo("pytorch-v9.9.9/version.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    # downstream --compare: a channel that lists one pytorch (a metadata-only package); catalogs
    # with a torch spec that is no version spec and with a source whose sha256 does not match
    write_metadata_package(work / "onetorch", "pytorch", "2.13.0", "cpu_generic_py311_h0000000_0")
    wheel = work / "tiny-1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    entry = {"name": "tiny", "version": "1.0", "kind": "conda-wheel", "flavour": "any", "torch": ">=2.0,<3",
             "source": {"url": wheel.as_uri(), "sha256": "0" * 64}, "imports": ["tiny"], "tests": {"pyargs": ["tiny"]}}
    (work / "badsha.yaml").write_text(json.dumps({"dependents": [entry]}))
    (work / "badspec.yaml").write_text(json.dumps({"dependents": [{**entry, "torch": "torch>=2.0"}]}))
    _build_stand_ins(work / "bin", work / "compiling")
    return tree, work


def _build_stand_ins(bin_dir: Path, compiling: Path) -> None:
    """conda and conda-build (tests/support/fake_docker/fake_conda.py), and a Python for
    --develop that answers the preflight and then "compiles" for BUILD_SECONDS."""
    bin_dir.mkdir()
    install_fake_conda(bin_dir)
    python = bin_dir / "rattler-python"
    python.write_text('#!/bin/sh\n[ "$1" = -c ] && exit 0   # the preflight: import rattler, rattler_build\n'
                      f'touch "{compiling}"\nsleep {BUILD_SECONDS} & wait\n')
    python.chmod(0o755)


LOCALE_FOLDER = "caf\u00e9"   # the locale class's scratch folders: a name that is not ASCII


def _base_name(case: Case, index: int, clean: bool = False) -> str:
    return ((LOCALE_FOLDER + "-") if case.locale else "") + ("clean" if clean else "case") + f"-{index}"


def _fill(text: str, tree: Path, work: Path) -> str:
    return text.replace("{tree}", str(tree)).replace("{work}", str(work))


def _memory_cap() -> None:
    """In the case's process, before it starts: MEMORY_CAP of data (heap and private mappings;
    an address-space cap would stop the Rust renderers that reserve and never touch). A case
    that reads until memory runs out fails here, not on the machine."""
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))


def _command(case: Case, tree: Path, work: Path) -> tuple[list[str], Path, dict[str, str]]:
    """The case's command line, its folder and its environment."""
    argv = [_fill(arg, tree, work) for arg in case.argv]
    if case.feedstock:
        command = [sys.executable, "-m", "feedstock", "--feedstock-root", str(tree), *argv]
        cwd = ROOT
    else:
        command = [sys.executable, str(tree / "build-locally.py"), *argv]
        cwd = tree
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "DOCKER_EXECUTABLE")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if case.command in BUILDS:
        env.update(PATH=f"{work / 'bin'}{os.pathsep}{env.get('PATH', '')}", FAKE_CONDA_LOG=str(work / "conda.jsonl"),
                   FAKE_CONDA_BUILD_SECONDS=str(BUILD_SECONDS), RATTLER_BUILD_PYTHON=str(work / "bin" / "rattler-python"))
    if case.locale:   # an ASCII locale without Python's UTF-8 mode or its coercion
        env.update(LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    return command, cwd, env


def run_command(case: Case, tree: Path, work: Path, timeout: float) -> tuple[int, str]:
    command, cwd, env = _command(case, tree, work)
    try:
        proc = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, errors="replace", timeout=timeout, preexec_fn=_memory_cap)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s"
    return proc.returncode, proc.stdout + proc.stderr


# how long a command may take to stop after SIGTERM before it counts as a hang
SIGNAL_GRACE = 15.0


# the deaths by signal a SIGTERM'd command may end by: the signal itself (before its handler was
# set), or Python's own way out of a KeyboardInterrupt; judge_signalled and _crashed both use it
STOPPED_BY_SIGNAL = (-signal.SIGTERM, -signal.SIGINT)


def run_signalled(case: Case, tree: Path, work: Path, delay: float) -> tuple[int, str] | None:
    """The command, sent SIGTERM after `delay` seconds; None when it had ended by then."""
    command, cwd, env = _command(case, tree, work)
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", preexec_fn=_memory_cap)
    try:
        proc.communicate(timeout=delay)
        return None
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGTERM)
    try:
        output, _ = proc.communicate(timeout=SIGNAL_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return -1, f"still running {SIGNAL_GRACE:.0f} s after SIGTERM"
    return proc.returncode, output


def judge_signalled(code: int, output: str, changed: dict[str, str | None],
                    finished: dict[str, str], finished_code: int) -> tuple[str, bool]:
    """A command stopped by SIGTERM: it ends within the grace time, with 130 (its handler: one
    line; Python's own way out of an interrupt, death by SIGINT, is 130 to a shell too), by the
    signal itself (before its handler was set: nothing written yet), or as its uninterrupted run
    ends (the signal came as it finished, or inside a library that ends its work first); no
    traceback, and every file it changed is as the uninterrupted run leaves it (nothing
    half-written, no temporary file left)."""
    if "Traceback (most recent call last)" in output:
        return "traceback", True
    if code == -1:
        return output, False
    if code not in (130, *STOPPED_BY_SIGNAL, finished_code):
        return f"exit {code} after SIGTERM", False
    errors = [line for line in output.splitlines() if re.match(r"^([\w. -]+: )?error: |^build-locally: ", line)]
    # the interrupt is the last word (a command may have reported a failed item before it)
    if code in (130, -signal.SIGINT) and not (errors and "interrupted" in errors[-1]):
        return f"exit 130 without an interrupted line last ({len(errors)} error lines)", False
    torn = sorted(path for path, value in changed.items() if finished.get(path) != value)
    if torn:
        return "left " + ", ".join(torn[:4]), False
    return "", False


def judge(case: Case, code: int, output: str, clean: tuple[int, str] | None) -> tuple[str, bool]:
    """(problem or "", whether the output holds a traceback)."""
    traceback = "Traceback (most recent call last)" in output
    if traceback:
        return "traceback", True
    if code == -1:
        return output, False
    if code < 0:
        return f"crash (signal {-code})", False
    # ours: "error: ..."; argparse's: "PROG: error: ..."
    errors = [line for line in output.splitlines() if re.match(r"^([\w. -]+: )?error: ", line)]
    if code in (2, 3):
        return ("" if len(errors) == 1 else f"exit {code} with {len(errors)} error lines"), False
    same = clean is not None and (code, _normal(output)) == (clean[0], _normal(clean[1]))
    if same and (case.how in SAME_MEANING or (case.target, case.how) in ACCEPTED):
        return "", False
    if code == 1 and any(command == case.command and target in (case.target, None) and how in (case.how, None)
                         for command, target, how in FINDINGS):
        return "", False
    return f"exit {code}" + (f" ({output.strip().splitlines()[-1][:160]})" if output.strip() else ""), False


def _normal(output: str) -> str:
    # the scratch folder and timings differ from run to run
    output = re.sub(r"/[\w/.-]*bad-inputs-[\w]+/(" + LOCALE_FOLDER + r"-)?(case|clean)-\d+", "SCRATCH", output)
    return re.sub(r"\d+", "N", output)


# the commands' own work and output folders under {work} (the tree's files and the inputs count)
OWN_OUTPUTS = tuple(f"work/{name}" for name in ("dswork", "image-out", "o")) + ("dswork", "image-out", "o")


def run_case(case: Case, base: Path, timeout: float, clean: dict) -> Result | None:
    tree, work = make_scratch(base)
    try:
        if case.target is not None:
            target = Path(_fill(case.target, tree, work)) if "{work}" in case.target else tree / case.target
            if not break_file(target, case.how or ""):
                return None
        if case.kill_with is not None:
            return _run_lifecycle_case(case, base, tree, work, clean[_clean_key(case)])
        if case.signal_at is not None:
            return _run_signalled_case(case, tree, work, clean[_clean_key(case)])
        before = tree_digest(tree), tree_digest(work)
        code, output = run_command(case, tree, work, _time_bound(case, timeout))
        after = tree_digest(tree), tree_digest(work)
        changed = sorted({path for b, a in zip(before, after) for path in set(b) | set(a)
                          if b.get(path) != a.get(path)
                          and not path.startswith(OWN_OUTPUTS)})
        problem, traceback = judge(case, code, output, clean.get(_clean_key(case)))
        if changed and not problem:
            problem = "changed " + ", ".join(changed[:4])
        return Result(case, code, output, changed, problem, traceback)
    finally:
        for path in base.rglob("*"):
            if not path.is_symlink():
                try:
                    path.chmod(0o700 if path.is_dir() else 0o600)
                except OSError:
                    pass
        shutil.rmtree(base, ignore_errors=True)


def _both(tree: Path, work: Path) -> dict[str, str]:
    return {**{f"tree/{k}": v for k, v in tree_digest(tree).items()},
            **{f"work/{k}": v for k, v in tree_digest(work).items()}}


def _run_signalled_case(case: Case, tree: Path, work: Path, finished: tuple[float, dict[str, str]]) -> Result | None:
    seconds, finished_code, finished_tree = finished
    before = _both(tree, work)
    # a command of a fraction of a second is stopped while Python starts: before its handler
    # is set, it dies of the signal, which is fine when it has written nothing yet
    ran = run_signalled(case, tree, work, delay=seconds * (case.signal_at or 0))
    if ran is None:
        return None  # it ended before the signal: nothing to judge
    code, output = ran
    after = _both(tree, work)
    changed = {path: after.get(path) for path in set(before) | set(after) if before.get(path) != after.get(path)
               and not path.startswith(OWN_OUTPUTS)}
    problem, traceback = judge_signalled(code, output, changed, finished_tree, finished_code)
    # a file the stopped run wrote whole (as its uninterrupted run does) is no changed tree
    torn = sorted(path for path, value in changed.items() if finished_tree.get(path) != value)
    return Result(case, code, output, torn, problem, traceback)


def processes_of(token: str) -> list[int]:
    """The running processes (zombies left out) that carry RUN_TOKEN=token in their environment."""
    needle, found = f"{RUN_TOKEN}={token}\0".encode(), []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (entry / "environ").read_bytes() \
                    and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def _describe(pid: int) -> str:
    try:
        return f"{pid} " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return str(pid)


def run_lifecycle(case: Case, base: Path, tree: Path, work: Path, delay: float) -> tuple[int, str, list[str]] | None:
    """The command, sent case.kill_with after `delay` seconds; (its exit, its output, the
    processes it started that still ran ORPHAN_WAIT seconds after it died). None when it had
    ended by then. Output goes to a file: a child that outlives it must not hold a pipe."""
    command, cwd, env = _command(case, tree, work)
    token = f"{os.getpid()}-{base.name}-{time.monotonic_ns()}"
    env[RUN_TOKEN] = token
    log = base / "lifecycle-output.txt"
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, preexec_fn=_memory_cap, start_new_session=True)
    hung = False
    try:
        proc.wait(timeout=delay)
        ended = True
    except subprocess.TimeoutExpired:
        ended = False
        proc.send_signal(case.kill_with)
        try:
            proc.wait(timeout=SIGNAL_GRACE)
        except subprocess.TimeoutExpired:
            hung = True
            proc.kill()
            proc.wait()
    died = time.monotonic()
    if case.command in BUILDS and not ended:   # right away: a second run that may not build beside it
        subprocess.run([*command, "--no-wait"], cwd=cwd, env={**env, "FAKE_CONDA_BUILD_SECONDS": "0"},
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120, preexec_fn=_memory_cap)
    while processes_of(token) and time.monotonic() - died < ORPHAN_WAIT:
        time.sleep(0.1)
    orphans = [_describe(pid) for pid in processes_of(token)]
    for pid in processes_of(token):   # not to disturb the cases after it
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if ended:
        return None
    output = log.read_text(errors="replace")
    if hung:
        return -1, f"still running {SIGNAL_GRACE:.0f} s after {signal.Signals(case.kill_with).name}", orphans
    # a death by the hangup is kept as a shell reports it: -1 (-SIGHUP) means a hang here
    return (DIED_OF_HANGUP if proc.returncode == -signal.SIGHUP else proc.returncode), output, orphans


def judge_lifecycle(case: Case, code: int, output: str, orphans: list[str], second_builds: int,
                    finished_code: int) -> tuple[str, bool]:
    """Killed with SIGKILL, a command dies of it; hung up, it ends as an interrupt (129 or 130
    and its interrupted line last), dies of the hangup or ends as its full run does, without a
    traceback, within the grace time. Either way: no orphan, no second build."""
    if "Traceback (most recent call last)" in output:
        return "traceback", True
    if orphans:
        return f"{len(orphans)} orphans: " + "; ".join(orphans[:2]), False
    if second_builds:
        return f"{second_builds} second builds beside the running one", False
    if code == -1:
        return output, False
    if case.kill_with == signal.SIGKILL:
        return ("", False) if code in (-signal.SIGKILL, finished_code) else (f"exit {code} after SIGKILL", False)
    if code == DIED_OF_HANGUP:   # before its handler was set
        return "", False
    if code not in (129, 130, -signal.SIGINT, finished_code):
        return f"exit {code} after SIGHUP", False
    errors = [line for line in output.splitlines() if re.match(r"^([\w. -]+: )?error: |^build-locally: ", line)]
    if code in (129, 130) and not (errors and "interrupted" in errors[-1]):
        return f"exit {code} without an interrupted line last ({len(errors)} error lines)", False
    return "", False


def _run_lifecycle_case(case: Case, base: Path, tree: Path, work: Path,
                        finished: tuple[float, int, dict[str, str]]) -> Result | None:
    seconds, finished_code, _ = finished
    ran = run_lifecycle(case, base, tree, work, delay=seconds * (case.signal_at or 0))
    if ran is None:
        return None
    code, output, orphans = ran
    log = work / "conda.jsonl"
    second = sum(1 for line in (log.read_text().splitlines() if log.exists() else [])
                 if json.loads(line).get("build_overlap"))
    problem, traceback = judge_lifecycle(case, code, output, orphans, second, finished_code)
    return Result(case, code, output, [], problem, traceback, orphans, second)


def _clean_key(case: Case) -> tuple:
    if case.signal_at is not None:  # the same command and breakage, run to its end
        return ("to its end", case.command, case.argv, case.feedstock, case.target, case.how)
    return (case.command, case.argv, case.feedstock, case.locale)


def clean_runs(cases: list[Case], scratch: Path, timeout: float, jobs: int = 1) -> dict:
    """The clean run of every command that a same-meaning breakage is compared with, and of
    every signalled command (its time and the tree it leaves); `jobs` at once."""
    wanted = {_clean_key(c): c for c in cases
              if c.how in SAME_MEANING or (c.target, c.how) in ACCEPTED or c.signal_at is not None}

    def clean_run(index: int, case: Case):
        base = scratch / _base_name(case, index, clean=True)
        base.mkdir()
        tree, work = make_scratch(base)
        try:
            if case.signal_at is None:
                return run_command(Case(case.command, case.argv, feedstock=case.feedstock, locale=case.locale),
                                   tree, work, timeout)
            if case.target is not None:
                break_file(Path(_fill(case.target, tree, work)) if "{work}" in case.target else tree / case.target,
                           case.how or "")
            started = time.monotonic()
            code, _ = run_command(case, tree, work, timeout)
            return time.monotonic() - started, code, _both(tree, work)
        finally:
            shutil.rmtree(base, ignore_errors=True)

    ordered = sorted(wanted.items(), key=lambda item: repr(item[0]))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda item: clean_run(item[0], item[1][1]), enumerate(ordered)))
    return {key: result for (key, _), result in zip(ordered, results)}


def _crashed(result: Result) -> bool:
    """Died of a signal, other than the ways out judge_signalled accepts for a signalled case
    (STOPPED_BY_SIGNAL; judge_signalled checks the interrupted line)."""
    stopped = result.case.signal_at is not None and result.code in STOPPED_BY_SIGNAL
    if result.case.kill_with is not None:   # the lifecycle class: the signal it was sent
        stopped = result.code in (-result.case.kill_with, -signal.SIGINT)
    return result.code < -1 and not stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="The summary line: bad inputs: N tried, T tracebacks, C trees changed, H hangs, K crashes, "
                                            "O orphans")
    parser.add_argument("-k", dest="match", metavar="TEXT", help="only the cases whose name contains TEXT")
    parser.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                        help="cases run at once (default: the cores, at most 4)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds one command may take")
    parser.add_argument("--verbose", action="store_true", help="print every case with its exit status")
    args = parser.parse_args(argv)
    cases = [c for c in all_cases() if not args.match or args.match in c.name]
    if not cases:
        print(f"error: no case matches {args.match!r}", file=sys.stderr)
        return 2
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bad-inputs-") as scratch_name:
        scratch = Path(scratch_name)
        clean = clean_runs(cases, scratch, args.timeout, args.jobs)
        bases = [scratch / _base_name(case, i) for i, case in enumerate(cases)]
        for base in bases:
            base.mkdir()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda pair: run_case(pair[0], pair[1], args.timeout, clean), zip(cases, bases)))
    tried = [r for r in results if r is not None]
    failed = [r for r in tried if r.problem]
    for result in tried:
        if result.problem or args.verbose:
            status = "FAIL" if result.problem else "ok"
            print(f"{status} {result.case.name}: exit {result.code}" + (f": {result.problem}" if result.problem else ""))
            if result.problem and args.verbose:
                print("    " + "\n    ".join(result.output.strip().splitlines()[-6:]))
    tracebacks = sum(r.traceback for r in tried)
    changed = sum(bool(r.changed) for r in tried)
    hangs = sum(r.code == -1 for r in tried)           # killed by the timeout
    crashes = sum(_crashed(r) for r in tried)           # died of a signal (SIGSEGV, SIGKILL of the OOM killer)
    orphans = sum(len(r.orphans) for r in tried)        # alive 10 s after their command died
    second = sum(r.second_builds for r in tried)
    other = len(failed) - sum(1 for r in failed if r.traceback or r.changed or r.code == -1 or _crashed(r)
                              or r.orphans or r.second_builds)
    skipped = len(results) - len(tried)
    print(f"{len(tried)} cases in {time.monotonic() - start:.0f} s ({skipped} not applicable here"
          f"{', unreadable files need a non-root user' if os.geteuid() == 0 else ''})")
    print(f"bad inputs: {len(tried)} tried, {tracebacks} tracebacks, {changed} trees changed, {hangs} hangs, "
          f"{crashes} crashes, {orphans} orphans" + (f", {second} second builds" if second else "")
          + (f", {other} other failures" if other else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
