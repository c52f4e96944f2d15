"""``render --batch FILE``: several configs rendered by one process.

build-locally's dry run renders every plan's config this way: one interpreter start and one import
of the renderer for the whole batch instead of one per config (about 0.15 s each), and the
renderer's caches of parsed and compiled recipe text serve every config after the first.

The input (a file, or ``-`` for standard input) is a JSON list of requests::

    [{"config": "linux_64_...", "environment": {"FEEDSTOCK_DEV_TAG": "py312"}}, ...]

``config`` is what ``render CONFIG`` takes (a name, NAME.yaml or the path of a job file);
``environment`` (optional) holds variables set while that config renders, as the build sets them
(the recipe reads FEEDSTOCK_DEV_TAG). The output is a JSON list, one entry per request, in order:
``{"config": ..., "outputs": [...]}`` (what ``render CONFIG --json`` prints), or
``{"config": ..., "error": LINE}`` (the line ``render CONFIG`` ends with, without ``error: ``).
Exit 0 when every config rendered, 1 when one did not (each also named on stderr), 2 when the
batch itself is bad input: one error line, nothing rendered.
"""
from __future__ import annotations

import json
import os
import re
import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from common.input_files import MAX_INPUT_BYTES, NotUtf8Text, decode_text
from common.nesting import depth_refusal
from common.suggest import did_you_mean

from ..errors import FeedstockError
from ..text_input import read_text

MAX_REQUESTS = 1024  # a feedstock has tens of configs; each renders in about 0.1 s
KEYS = ("config", "environment")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHAPE = 'a JSON list of {"config": NAME, "environment": {"VARIABLE": "value"}} requests'


@dataclass(frozen=True)
class RenderRequest:
    config: str
    environment: dict[str, str] = field(default_factory=dict)


def read_batch(source: str) -> list[RenderRequest]:
    """The requests of ``--batch SOURCE`` (a path, or ``-``: standard input); any flaw in the
    batch itself is one FeedstockError (exit 2) before anything renders."""
    label = f"--batch {source}"
    if source == "-":
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        if len(data) > MAX_INPUT_BYTES:
            raise FeedstockError(f"{label}: standard input holds more than {MAX_INPUT_BYTES >> 20} MiB")
        try:
            text = decode_text(data, label)
        except NotUtf8Text as err:
            raise FeedstockError(str(err)) from None
    else:
        try:
            text = read_text(Path(source), label)
        except FileNotFoundError:
            raise FeedstockError(f"{label}: no such file") from None
    return parse_batch(text, label)


def parse_batch(text: str, label: str) -> list[RenderRequest]:
    """The requests a batch's text holds, checked entry by entry."""
    refusal = depth_refusal(text, label)
    if refusal:
        raise FeedstockError(f"{refusal}; the batch is {SHAPE}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise FeedstockError(f"{label}:{err.lineno}: not valid JSON ({err.msg}); the batch is {SHAPE}") from None
    if not isinstance(data, list):
        raise FeedstockError(f"{label}: a JSON {_kind(data)} where the batch is {SHAPE}")
    if not data:
        raise FeedstockError(f"{label}: the list names no config; the batch is {SHAPE}")
    if len(data) > MAX_REQUESTS:
        raise FeedstockError(f"{label}: {len(data)} requests, more than the {MAX_REQUESTS} one batch takes")
    return [_request(entry, f"{label}: request {number}") for number, entry in enumerate(data, 1)]


def _kind(value: Any) -> str:
    """JSON's name for what a value was written as."""
    kinds = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return kinds.get(type(value), "number")


def _request(entry: Any, where: str) -> RenderRequest:
    if not isinstance(entry, dict):
        raise FeedstockError(f"{where}: a JSON {_kind(entry)} where a request is "
                             '{"config": NAME} (with "environment" optional)')
    for key in entry:
        if key not in KEYS:
            hint = did_you_mean(key, list(KEYS)) or f"the keys are {', '.join(KEYS)}"
            raise FeedstockError(f"{where}: unknown key {key!r}; {hint}")
    config = entry.get("config")
    if not isinstance(config, str) or not config.strip():
        raise FeedstockError(f"{where}: \"config\" must name a config (a .ci_support name or a job file)")
    environment = entry.get("environment", {})
    if not isinstance(environment, dict):
        raise FeedstockError(f"{where}: \"environment\" must map variable names to strings")
    for name, value in environment.items():
        # os.environ refuses these with a ValueError; say which request holds them
        if not _NAME.fullmatch(name):
            raise FeedstockError(f"{where}: {name!r} is no variable name (letters, digits, _)")
        if not isinstance(value, str) or "\0" in value:
            raise FeedstockError(f"{where}: the value of {name} must be a string without NUL bytes")
    return RenderRequest(config, dict(environment))


@contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """The variables set for one config's render, the process's own back after it (the renderer
    reads os.environ, as the build's own render does)."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def error_line(exc: BaseException) -> str:
    """The line `render CONFIG` ends with for this failure, without its `error: ` (a refusal's
    one line; for a renderer bug, the traceback's last line)."""
    text = f"error: {exc}" if isinstance(exc, FeedstockError) else "".join(traceback.format_exception_only(exc))
    lines = text.strip().splitlines()
    return lines[-1].removeprefix("error: ") if lines else type(exc).__name__


def render_batch(root: Path, requests: list[RenderRequest]) -> list[dict[str, Any]]:
    """One entry per request, in order; a config that fails is its entry's error (the traceback
    of a renderer bug goes to stderr), and the next one renders as if alone."""
    from .render.outputs import render_ci_config

    results: list[dict[str, Any]] = []
    for request in requests:
        try:
            with _environment(request.environment):
                outputs = render_ci_config(root, request.config)
        except Exception as exc:  # noqa: BLE001 - one config's failure is its entry, as `render CONFIG` exits alone
            if not isinstance(exc, FeedstockError):
                traceback.print_exc()
            results.append({"config": request.config, "error": error_line(exc)})
            continue
        results.append({"config": request.config, "outputs": [output.to_dict() for output in outputs]})
    return results


def run(root: Path, source: str) -> int:
    """`render --batch SOURCE`: the JSON list on stdout; exit 1 when a config failed."""
    results = render_batch(root, read_batch(source))
    try:
        print(json.dumps(results), flush=True)
    except BrokenPipeError:  # piped into `head` and the like: what it read is all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    failed = [entry for entry in results if "error" in entry]
    for entry in failed:
        print(f"error: {entry['config']}: {entry['error']}", file=sys.stderr)
    return 1 if failed else 0
