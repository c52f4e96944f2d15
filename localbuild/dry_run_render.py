"""The dry run's renders: the outputs of every plan's config from `python -m feedstock render
--batch`, a few processes for all the plans instead of one per config.

build-locally stands on the standard library and never imports the feedstock tools (they need
PyYAML and Jinja2): the renderer runs in processes of its own, under this Python, from the tools
beside build-locally.py. Each process costs about 0.15 s to start and import the renderer, and
the renderer's caches of recipe text serve every config it renders after its first, so the
configs go in contiguous groups (neighbours share most of their recipe text), at most one
process per usable core.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEV_TAG_VARIABLE = "FEEDSTOCK_DEV_TAG"
MAX_PROCESSES = 4       # past this, starting the renderer costs more than the split saves
CONFIGS_PER_PROCESS = 2  # a lone config renders faster than a second process starts
TIMEOUT_S = 600


@dataclass(frozen=True)
class RenderRequest:
    config: str                                     # a .ci_support name, or a derived config's path
    environment: dict[str, str] = field(default_factory=dict)  # set while it renders (the dev tag)


@dataclass(frozen=True)
class Rendered:
    outputs: list[dict[str, Any]] | None = None     # None: it did not render
    error: str = ""                                 # why not, one line
    unavailable: bool = False                       # the tools could not even start here


def tools_folder() -> tuple[Path | None, str]:
    """The folder holding the feedstock tools beside build-locally.py, or (None, why not)."""
    tools = Path(__file__).resolve().parents[1]
    if not (tools / "feedstock" / "__main__.py").is_file():
        return None, f"no feedstock tools beside build-locally.py in {tools}"
    return tools, ""


def render_all(tools: Path, root: Path, requests: list[RenderRequest], scratch: Path) -> list[Rendered]:
    """One result per request, in order; `scratch` (an empty folder) takes the batch files and
    the processes' output. A process that fails as a whole fails each of its configs with its line."""
    groups = split(requests, processes(len(requests)))
    # the recipe reads the build's variables (FEEDSTOCK_DEV_TAG) per request, never the shell's
    env = {key: value for key, value in os.environ.items() if key != DEV_TAG_VARIABLE}
    env["PYTHONPATH"] = str(tools)
    started: list[tuple[subprocess.Popen, Path, Path]] = []
    try:
        for index, group in enumerate(groups):
            batch = scratch / f"batch-{index}.json"
            batch.write_text(json.dumps([{"config": r.config, "environment": r.environment} for r in group]),
                             encoding="utf-8")
            out, err = scratch / f"batch-{index}.out", scratch / f"batch-{index}.err"
            # files, not pipes: no process waits on a full pipe while another one is read
            with open(out, "wb") as stdout, open(err, "wb") as stderr:
                command = [sys.executable, "-m", "feedstock", "--feedstock-root", str(root), "render",
                           "--batch", str(batch)]
                started.append((subprocess.Popen(command, cwd=tools, env=env, stdin=subprocess.DEVNULL,
                                                 stdout=stdout, stderr=stderr), out, err))
        results: list[Rendered] = []
        for (proc, out, err), group in zip(started, groups):
            results += _collect(proc, out, err, len(group))
        return results
    finally:  # Ctrl-C or a timeout: no renderer outlives the dry run
        for proc, _, _ in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def processes(count: int) -> int:
    """How many renderer processes for `count` configs: one per usable core at most."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_PROCESSES, count // CONFIGS_PER_PROCESS))


def split(requests: list[RenderRequest], parts: int) -> list[list[RenderRequest]]:
    """`parts` contiguous groups of near-equal size, in order (none empty)."""
    parts = max(1, min(parts, len(requests)))
    size, extra = divmod(len(requests), parts)
    groups, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        groups.append(requests[start:end])
        start = end
    return groups


def _collect(proc: subprocess.Popen, out: Path, err: Path, count: int) -> list[Rendered]:
    try:
        proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return [Rendered(error=f"TimeoutExpired: {exc}")] * count
    stdout = out.read_text(encoding="utf-8", errors="replace")
    if proc.returncode in (0, 1):   # 1: a config failed, and its entry says why
        try:
            entries = json.loads(stdout)
        except ValueError:
            entries = None
        if isinstance(entries, list) and len(entries) == count and all(isinstance(e, dict) for e in entries):
            return [_entry(entry) for entry in entries]
    lines = err.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return [_failure(lines[-1] if lines else f"exit {proc.returncode}")] * count


def _entry(entry: dict[str, Any]) -> Rendered:
    outputs = entry.get("outputs")
    if isinstance(outputs, list) and all(isinstance(output, dict) for output in outputs):
        return Rendered(outputs=outputs)
    return _failure(str(entry.get("error") or "the renderer's answer holds no outputs"))


def _failure(line: str) -> Rendered:
    """A failure line as `render CONFIG` ends with it: a missing module means the tools cannot
    run under this Python at all, anything else is the config's own refusal or a renderer bug."""
    if "ModuleNotFoundError" in line or "No module named" in line:
        return Rendered(error=line, unavailable=True)
    return Rendered(error=line.removeprefix("error: "))
