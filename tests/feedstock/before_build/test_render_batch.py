"""`python -m feedstock render --batch FILE`: every config of a batch in one process, each exactly
as `render CONFIG --json` renders it alone; a config that fails is its own entry; a bad batch is
one error line and exit 2."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from feedstock.before_build import render_batch
from feedstock.before_build.render import outputs as render_outputs
from feedstock.before_build.render_batch import RenderRequest
from feedstock.cli import main
from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.paths import CPU_GENERIC_JOB, REPO_ROOT

CONFIGS = sorted(path.stem for path in (REPO_ROOT / ".ci_support").glob("*.yaml"))


def alone(config: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`render CONFIG --json` in a process of its own: (exit, stdout, its last stderr line)."""
    proc = run_feedstock_cli("render", config, "--json", env=env)
    lines = proc.stderr.strip().splitlines()
    return proc.returncode, proc.stdout, lines[-1] if lines else ""


def test_a_batch_renders_every_config_as_render_config_json_does(tmp_path, monkeypatch):
    """Every .ci_support config, one with a dev tag before its plain render (the variable must not
    leak into the next request), one given as a path (the dry run's derived copy), one unknown:
    each entry is what that config's own `render CONFIG --json` process prints, or its error line."""
    if not CONFIGS:
        pytest.skip(".ci_support/ has no configs (python -m feedstock rerender)")
    monkeypatch.delenv("FEEDSTOCK_DEV_TAG", raising=False)
    copy = tmp_path / f"{CPU_GENERIC_JOB}.yaml"
    shutil.copy2(REPO_ROOT / ".ci_support" / copy.name, copy)
    requests = [{"config": CPU_GENERIC_JOB, "environment": {"FEEDSTOCK_DEV_TAG": "py312"}},
                *({"config": name} for name in CONFIGS),
                {"config": str(copy)}, {"config": "no_such_config"}]
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(requests))
    proc = run_feedstock_cli("render", "--batch", str(batch))
    assert proc.returncode == 1, proc.stderr     # the unknown config
    entries = json.loads(proc.stdout)
    assert [entry["config"] for entry in entries] == [request["config"] for request in requests]
    for request, entry in zip(requests, entries):
        code, stdout, last = alone(request["config"], request.get("environment"))
        if code == 0:
            assert entry == {"config": request["config"], "outputs": json.loads(stdout)}, request
        else:
            assert entry == {"config": request["config"], "error": last.removeprefix("error: ")}, request
    assert entries[0]["outputs"][0]["build_string"].startswith("devpy312_")
    assert proc.stderr.strip().splitlines() == [f"error: no_such_config: {entries[-1]['error']}"]


def test_standard_input_is_a_batch_too():
    batch = json.dumps([{"config": CPU_GENERIC_JOB}])
    proc = subprocess.run([sys.executable, "-m", "feedstock", "--feedstock-root", str(REPO_ROOT), "render",
                           "--batch", "-"], input=batch, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if k != "FEEDSTOCK_DEV_TAG"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"config": CPU_GENERIC_JOB, "outputs": json.loads(alone(CPU_GENERIC_JOB)[1])}]


def test_a_renderer_bug_is_its_configs_entry_and_the_next_config_renders(monkeypatch, capsys):
    """A crash is what `render CONFIG` ends with alone (the traceback's last line), its traceback
    goes to stderr, and the batch goes on."""
    def render(root, name):
        if name == "buggy":
            raise KeyError("renderer bug")
        return [render_outputs.RenderedOutput(name="libtorch", version="1", build_string="h0", build_number=0,
                                              requirements={}, run_exports=[], tests={})]

    monkeypatch.setattr(render_outputs, "render_ci_config", render)
    results = render_batch.render_batch(REPO_ROOT, [RenderRequest("buggy"), RenderRequest("fine")])
    assert results[0] == {"config": "buggy", "error": "KeyError: 'renderer bug'"}
    assert results[1]["outputs"][0]["build_string"] == "h0"
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_each_request_renders_with_its_environment_and_leaves_the_process_as_it_was(monkeypatch):
    seen = []
    monkeypatch.setattr(render_outputs, "render_ci_config",
                        lambda root, name: seen.append((name, os.environ.get("FEEDSTOCK_DEV_TAG"))) or [])
    monkeypatch.setenv("FEEDSTOCK_DEV_TAG", "shell")
    render_batch.render_batch(REPO_ROOT, [RenderRequest("a", {"FEEDSTOCK_DEV_TAG": "x"}), RenderRequest("b"),
                                          RenderRequest("c", {"FEEDSTOCK_DEV_TAG": "y", "ZZ_RENDER_BATCH": "1"})])
    assert seen == [("a", "x"), ("b", "shell"), ("c", "y")]
    assert os.environ["FEEDSTOCK_DEV_TAG"] == "shell" and "ZZ_RENDER_BATCH" not in os.environ


BAD_BATCHES = [
    (b"", "--batch {file}:1: not valid JSON (Expecting value); the batch is a JSON list of"),
    (b'{"config": "x"}', "--batch {file}: a JSON object where the batch is a JSON list of"),
    (b"[]", "--batch {file}: the list names no config"),
    (b"[1]", "--batch {file}: request 1: a JSON number where a request is"),
    (b'[{"config": "x"}, {"confg": "y"}]', "--batch {file}: request 2: unknown key 'confg'; did you mean config?"),
    (b'[{"config": ""}]', "--batch {file}: request 1: \"config\" must name a config"),
    (b'[{"config": 3}]', "--batch {file}: request 1: \"config\" must name a config"),
    (b'[{"config": "x", "environment": ["A"]}]', "--batch {file}: request 1: \"environment\" must map"),
    (b'[{"config": "x", "environment": {"A=B": "1"}}]', "--batch {file}: request 1: 'A=B' is no variable name"),
    (b'[{"config": "x", "environment": {"A": 1}}]', "--batch {file}: request 1: the value of A must be a string"),
    (b"[" * 100_000, "--batch {file}:1: nested more than 64 levels deep"),
    (b'[{"config": "caf\xe9"}]', "--batch {file}:1: byte 0xe9 is not UTF-8 text"),
    (json.dumps([{"config": "x"}] * (render_batch.MAX_REQUESTS + 1)).encode(), "requests, more than the 1024"),
]


@pytest.mark.parametrize("data, message", BAD_BATCHES, ids=[m.split(": ", 1)[-1][:40] for _, m in BAD_BATCHES])
def test_a_bad_batch_is_one_error_line_and_exit_2(tmp_path, capsys, data, message):
    batch = tmp_path / "batch.json"
    batch.write_bytes(data)
    assert main(["--feedstock-root", str(REPO_ROOT), "render", "--batch", str(batch)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    assert message.format(file=batch) in err


@pytest.mark.parametrize("argv, message", [
    (["render", "--batch", "{tmp}/nowhere.json"], "--batch {tmp}/nowhere.json: no such file"),
    (["render", "--batch", "{tmp}"], "--batch {tmp} is a folder; a file belongs there"),
    (["render", CPU_GENERIC_JOB, "--batch", "{tmp}"], "render takes a CONFIG or --batch FILE, not both"),
    (["render"], "render needs a CONFIG (a .ci_support name), or --batch FILE"),
])
def test_a_batch_that_is_no_file_or_a_render_of_both_is_one_error_line(tmp_path, capsys, argv, message):
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert main(["--feedstock-root", str(REPO_ROOT), *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"error: {message.replace('{tmp}', str(tmp_path))}")
