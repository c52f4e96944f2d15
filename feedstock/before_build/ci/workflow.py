"""The GitHub Actions workflow, `.github/workflows/build.yml`, from conda-forge.yml, ci-runners.yml
and the same CI job list as `.ci_support/`. Not conda-smithy's `conda-build.yml`: its rerender
rewrites that file whatever `skip_render` says (see tests/feedstock/before_build/ci/test_conda_smithy_coexistence.py).

One build job per `.ci_support` config (a matrix entry each) runs `build-locally.py CONFIG`,
so CI runs the same `localbuild/in_container/build_steps.sh` in the same image as a local build. GPU configs
compile on the platform's CPU runners; their tests run again in a second job only where
ci-runners.yml's `gpu_runs_on` names runner labels for that GPU backend.

conda-forge.yml keys read (under `github_actions`; conda-smithy's schema allows no others there):

    timeout_minutes: 1440          per job
    self_hosted: true              default labels [self-hosted, linux|macOS, x64|ARM64]
    cancel_in_progress: true       a new push to a pull request cancels its older run
    artifact_retention_days: 14

ci-runners.yml (ours; optional, unknown keys are errors):

    runs_on: {linux_64: [...]}     runner labels per platform (override the defaults)
    gpu_runs_on: {cuda: [...]}     runner labels for GPU tests, per GPU backend (linux-64);
                                   cuda_sbsa / cuda_tegra for linux-aarch64's arm_variant_type

Security shape: `permissions: {}` at the top, `contents: read` per job; checkout without
persisted credentials; matrix values reach shell code only through `env:`; the upload token is
only in the upload step, which runs only for pushes to the main branch; pull requests use the
compile cache read-only. The compile cache: the repository variable FEEDSTOCK_COMPILE_CACHE (a
URL) and the secret FEEDSTOCK_COMPILE_CACHE_PASSWORD, handed to build-locally by name.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from common.driver import DriverMissing, driver_module

from ...errors import FeedstockError
from ...text_input import read_compared, read_yaml
from ...layout import PLATFORM_NAMES, Feedstock, did_you_mean
from .jobs import CiJob

WORKFLOW_PATH = ".github/workflows/build.yml"
# our own CI settings: conda-forge.yml's github_actions section allows only conda-smithy's keys
RUNNERS_FILE = "ci-runners.yml"
RUNNERS_KEYS = ("runs_on", "gpu_runs_on")
# the keys conda-smithy's schema allows under github_actions (GithubActionsConfig in
# conda_smithy/schema.py, extra="forbid"); we read four of them and leave the rest to conda-smithy
SMITHY_GITHUB_ACTIONS_KEYS = (
    "artifact_retention_days", "cancel_in_progress", "free_disk_space", "max_parallel",
    "resize_win_partitions", "self_hosted", "store_build_artifacts", "timeout_minutes",
    "triggers", "upload_packages")
MAIN_BRANCH = "main"
DEFAULT_TIMEOUT_MINUTES = 360
DEFAULT_RETENTION_DAYS = 14
# GitHub-hosted runners per platform, when not self-hosted and no runs_on is given
HOSTED_LABELS = {"linux_64": ["ubuntu-latest"], "linux_aarch64": ["ubuntu-24.04-arm"],
                 "osx_64": ["macos-13"], "osx_arm64": ["macos-14"]}
SELF_HOSTED_LABELS = {"linux_64": ["self-hosted", "linux", "x64"],
                      "linux_aarch64": ["self-hosted", "linux", "ARM64"],
                      "osx_64": ["self-hosted", "macOS", "x64"],
                      "osx_arm64": ["self-hosted", "macOS", "ARM64"]}
GPU_BACKENDS = ("cuda", "rocm")
# gpu_runs_on keys: a backend (linux-64 jobs) or backend_<arm_variant_type> (linux-aarch64 jobs)
GPU_RUNNER_KEYS = GPU_BACKENDS + ("cuda_sbsa", "cuda_tegra")
# Actions used, pinned to full commit hashes (tags can be moved); the comment says which release.
CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683  # v4.2.2"
UPLOAD_ARTIFACT = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02  # v4.6.2"
DOWNLOAD_ARTIFACT = "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093  # v4.3.0"
ANACONDA_CLIENT = "anaconda-client==1.16.0"


@dataclass(frozen=True)
class WorkflowSettings:
    timeout_minutes: int
    runs_on: dict[str, list[str]]         # platform -> labels
    gpu_runs_on: dict[str, list[str]]     # backend -> labels
    cancel_in_progress: bool
    retention_days: int


def _labels(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise FeedstockError(f"{where} must be a runner label or a list of labels; fix it")
    return [v.strip() for v in value]


def _positive(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FeedstockError(f"conda-forge.yml: {where} must be a whole number of at least 1; fix it")
    return value


def _mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FeedstockError(f"{where} must be a mapping; fix it")
    return value


def _known_keys(section: dict, known: tuple[str, ...], where: str) -> None:
    """One line for the first key not in ``known``, naming the closest known one."""
    for key in section:
        if str(key) not in known:
            raise FeedstockError(f"{where}: unknown key '{key}'; {did_you_mean(str(key), known)}")


def _forge_section(feedstock: Feedstock) -> dict:
    """conda-forge.yml's github_actions, holding only keys conda-smithy's schema allows."""
    section = _mapping(feedstock.forge_config.get("github_actions"), "conda-forge.yml: github_actions")
    for key in section:
        if key in RUNNERS_KEYS:
            raise FeedstockError(f"conda-forge.yml: github_actions.{key} is our setting, not "
                                 f"conda-smithy's (its schema forbids it there); move it to {RUNNERS_FILE}")
    _known_keys(section, SMITHY_GITHUB_ACTIONS_KEYS, "conda-forge.yml: github_actions")
    return section


def _runners(feedstock: Feedstock) -> dict:
    """ci-runners.yml (absent: {}), its keys checked."""
    path = feedstock.root / RUNNERS_FILE
    try:
        data = read_yaml(path, RUNNERS_FILE)
    except FileNotFoundError:
        return {}
    if data is None:  # an emptied file would drop every GPU runner from the workflow unseen
        raise FeedstockError(f"{RUNNERS_FILE} is empty; give it its settings, or delete it for no GPU "
                             "test runners")
    data = _mapping(data, RUNNERS_FILE)
    _known_keys(data, RUNNERS_KEYS, RUNNERS_FILE)
    return data


def settings(feedstock: Feedstock) -> WorkflowSettings:
    """The workflow settings from conda-forge.yml and ci-runners.yml, checked (bad values and
    unknown keys are one-line errors)."""
    section = _forge_section(feedstock)
    runners = _runners(feedstock)
    self_hosted = bool(section.get("self_hosted", False))
    runs_on = dict(SELF_HOSTED_LABELS if self_hosted else HOSTED_LABELS)
    for platform, labels in _mapping(runners.get("runs_on"), f"{RUNNERS_FILE}: runs_on").items():
        if str(platform) not in PLATFORM_NAMES:
            raise FeedstockError(f"{RUNNERS_FILE}: runs_on: unknown platform '{platform}'; "
                                 f"{did_you_mean(str(platform), PLATFORM_NAMES)}")
        runs_on[str(platform)] = _labels(labels, f"{RUNNERS_FILE}: runs_on.{platform}")
    gpu_runs_on = {}
    for backend, labels in _mapping(runners.get("gpu_runs_on"), f"{RUNNERS_FILE}: gpu_runs_on").items():
        if backend not in GPU_RUNNER_KEYS:
            raise FeedstockError(f"{RUNNERS_FILE}: gpu_runs_on: unknown GPU backend '{backend}'; "
                                 f"{did_you_mean(str(backend), GPU_RUNNER_KEYS)}")
        gpu_runs_on[backend] = _labels(labels, f"{RUNNERS_FILE}: gpu_runs_on.{backend}")
    return WorkflowSettings(
        timeout_minutes=_positive(section.get("timeout_minutes", DEFAULT_TIMEOUT_MINUTES),
                                  "github_actions.timeout_minutes"),
        runs_on=runs_on, gpu_runs_on=gpu_runs_on,
        cancel_in_progress=bool(section.get("cancel_in_progress", True)),
        retention_days=_positive(section.get("artifact_retention_days", DEFAULT_RETENTION_DAYS),
                                 "github_actions.artifact_retention_days"))


GpuBackend = Callable[[Mapping[str, str]], str]


def driver_gpu_backend(feedstock: Feedstock) -> GpuBackend:
    """The driver's decision (megabuild/build_env.gpu_backend): the one the build makes."""
    try:
        return driver_module(feedstock.root, "build_env").gpu_backend
    except DriverMissing as err:
        raise FeedstockError(f"{err}; the workflow's GPU test jobs follow its gpu_backend") from None


def gpu_runner_key(job: CiJob, gpu_backend: GpuBackend) -> str:
    """The gpu_runs_on key of a job: its backend, and on linux-aarch64 also its
    arm_variant_type (a Jetson and a Grace machine are different runners, neither x64)."""
    variant = {key: str((job.config.get(key) or [""])[0])
               for key in ("gpu_backend", "cuda_compiler_version", "rocm_version")}
    backend = gpu_backend(variant)
    arm = [str(v) for v in job.config.get("arm_variant_type") or []]
    if job.platform == "linux_aarch64" and backend != "cpu":
        return f"{backend}_{arm[0] if arm else 'sbsa'}"
    return backend


def _flow(labels: list[str]) -> str:
    return "[" + ", ".join(json.dumps(label) for label in labels) + "]"


def _matrix(entries: list[tuple[str, list[str]]]) -> list[str]:
    lines = ["      matrix:", "        include:"]
    for config, labels in entries:
        lines += [f"          - config: {config}", f"            runs_on: {_flow(labels)}"]
    return lines


BUILD_SCRIPT = """\
          set -euo pipefail
          args=()
          if [ -n "${FEEDSTOCK_COMPILE_CACHE}" ]; then
            args+=(--compile-cache "${FEEDSTOCK_COMPILE_CACHE}")
            if [ "${GITHUB_EVENT_NAME}" != push ] || [ "${GITHUB_REF}" != "refs/heads/MAIN" ]; then
              args+=(--compile-cache-read-only)
            fi
          fi
          python3 build-locally.py "${CONFIG}" ${args[@]+"${args[@]}"}"""

UPLOAD_SCRIPT = """\
          set -euo pipefail
          python3 -m venv "${RUNNER_TEMP}/upload-env"
          "${RUNNER_TEMP}/upload-env/bin/python" -m pip install --quiet "CLIENT"
          shopt -s nullglob
          packages=(build_artifacts/*/*.conda build_artifacts/*/*.tar.bz2)
          if [ "${#packages[@]}" -eq 0 ]; then
            echo "no packages in build_artifacts/ for ${CONFIG}" >&2
            exit 1
          fi
          "${RUNNER_TEMP}/upload-env/bin/anaconda" upload --skip-existing "${packages[@]}\""""

GPU_TEST_SCRIPT = """\
          set -euo pipefail
          python3 build-locally.py "${CONFIG}" --test-only --gpu-tests"""


def _block(script: str) -> list[str]:
    return ["        run: |"] + script.splitlines()


def _job(header: list[str], entries: list[tuple[str, list[str]]], config: WorkflowSettings) -> list[str]:
    """A matrix job's lines up to its first step, the checkout: both jobs share the runner,
    timeout, read-only permissions and credential-less checkout."""
    return [
        *header,
        "    runs-on: ${{ matrix.runs_on }}",
        f"    timeout-minutes: {config.timeout_minutes}",
        "    permissions:",
        "      contents: read",
        "    strategy:",
        "      fail-fast: false",
        *_matrix(entries),
        "    steps:",
        "      - name: Check out the feedstock",
        f"        uses: {CHECKOUT}",
        "        with:",
        "          persist-credentials: false",
    ]


def render_workflow(jobs: list[CiJob], config: WorkflowSettings, gpu_backend: GpuBackend) -> str:
    """The workflow file's text for these CI jobs (deterministic: same input, same bytes)."""
    builds, gpu_tests = _runner_rows(jobs, config, gpu_backend)
    lines = [*_header(config), *_build_job(builds, config)]
    if gpu_tests:
        lines += ["", *_gpu_test_job(gpu_tests, config)]
    return "\n".join(lines) + "\n"


def _runner_rows(jobs: list[CiJob], config: WorkflowSettings, gpu_backend: GpuBackend) -> tuple[list, list]:
    """(job name, runner labels) for every build, and for the jobs whose GPU has test runners."""
    builds, gpu_tests = [], []
    for job in sorted(jobs, key=lambda job: job.name):
        labels = config.runs_on.get(job.platform)
        if labels is None:
            raise FeedstockError(f"{RUNNERS_FILE}: no runner labels for platform {job.platform}; "
                                 f"add runs_on: {{{job.platform}: [labels]}} to {RUNNERS_FILE}")
        builds.append((job.name, labels))
        key = gpu_runner_key(job, gpu_backend)
        if key in config.gpu_runs_on:
            gpu_tests.append((job.name, config.gpu_runs_on[key]))
    if not builds:
        raise FeedstockError("no CI jobs to put into the workflow; check provider: in conda-forge.yml")
    return builds, gpu_tests


def _header(config: WorkflowSettings) -> list[str]:
    return [
        "# Generated by `python -m feedstock rerender` from conda-forge.yml and the .ci_support/",
        "# job list; do not edit (`python -m feedstock rerender --check` fails when it is stale).",
        "name: Build conda packages",
        "",
        "on:",
        "  push:",
        f"    branches: [{MAIN_BRANCH}]",
        "  pull_request:",
        "  workflow_dispatch:",
        "",
        "permissions: {}",
        "",
        "concurrency:",
        "  group: ${{ github.workflow }}-${{ github.event.pull_request.number || github.ref }}",
        "  cancel-in-progress: " + ("${{ github.event_name == 'pull_request' }}"
                                    if config.cancel_in_progress else "false"),
        "",
        "jobs:",
    ]


def _build_job(builds: list, config: WorkflowSettings) -> list[str]:
    main_push = f"github.event_name == 'push' && github.ref == 'refs/heads/{MAIN_BRANCH}'"
    return [
        *_job(["  build:", "    name: ${{ matrix.config }}"], builds, config),
        "      - name: Build (build-locally.py -> localbuild/in_container/build_steps.sh)",
        "        env:",
        "          CONFIG: ${{ matrix.config }}",
        "          FEEDSTOCK_COMPILE_CACHE: ${{ vars.FEEDSTOCK_COMPILE_CACHE }}",
        "          FEEDSTOCK_COMPILE_CACHE_PASSWORD: ${{ secrets.FEEDSTOCK_COMPILE_CACHE_PASSWORD }}",
        *_block(BUILD_SCRIPT.replace("MAIN", MAIN_BRANCH)),
        "      - name: Keep packages and logs",
        "        if: ${{ !cancelled() }}",
        f"        uses: {UPLOAD_ARTIFACT}",
        "        with:",
        "          name: ${{ matrix.config }}",
        "          path: |",
        "            build_artifacts/*/*.conda",
        "            build_artifacts/*/*.tar.bz2",
        "            build_artifacts/*/repodata.json",
        "            build_artifacts/*-log.txt",
        f"          retention-days: {config.retention_days}",
        "          if-no-files-found: warn",
        "      - name: Upload packages (main branch only)",
        f"        if: ${{{{ {main_push} }}}}",
        "        env:",
        "          CONFIG: ${{ matrix.config }}",
        "          ANACONDA_API_TOKEN: ${{ secrets.BINSTAR_TOKEN }}",
        *_block(UPLOAD_SCRIPT.replace("CLIENT", ANACONDA_CLIENT)),
    ]


def _gpu_test_job(gpu_tests: list, config: WorkflowSettings) -> list[str]:
    return [
        *_job(["  gpu_test:", "    name: GPU tests ${{ matrix.config }}", "    needs: build",
               "    if: ${{ !cancelled() }}"], gpu_tests, config),
        "      - name: Fetch the packages the build job made",
        f"        uses: {DOWNLOAD_ARTIFACT}",
        "        with:",
        "          name: ${{ matrix.config }}",
        "          path: build_artifacts",
        "      - name: Test on the GPU (build-locally.py --test-only --gpu-tests)",
        "        env:",
        "          CONFIG: ${{ matrix.config }}",
        *_block(GPU_TEST_SCRIPT),
    ]


def expected_workflow(feedstock: Feedstock, jobs: list[CiJob], checked: WorkflowSettings | None = None) -> str:
    """The workflow for `jobs`; `checked`: settings(feedstock) read before the jobs were rendered."""
    return render_workflow(jobs, checked or settings(feedstock), driver_gpu_backend(feedstock))


def workflow_state(feedstock: Feedstock, expected: str) -> str | None:
    """None when the committed workflow is `expected`, else "missing" or "out of date"."""
    path = feedstock.root / WORKFLOW_PATH
    if not path.is_file():
        return "missing"
    return None if read_compared(path, WORKFLOW_PATH) == expected else "out of date"


