"""build-locally.py: help, list, selecting configs, preflight errors, dry run.

Every test runs the real script in a throwaway feedstock tree with `python -S` (no
site-packages: the standard library only) and the fake container engine first on PATH.
"""
from __future__ import annotations

import json
import os
import select
import signal
import shutil
import subprocess
import sys
import time

import pytest

from tests.support.build_locally import CPU_IMAGE, CUDA_IMAGE, STANDARD_CONFIGS, make_feedstock
from tests.support.paths import REPO_ROOT

CUDA129 = "linux_64_blas_implmklcuda_compiler_version12.9"
CPU_MKL = "linux_64_blas_implmklcuda_compiler_versionNone"
CPU_GENERIC = "linux_64_blas_implgenericcuda_compiler_versionNone"
OSX = "osx_arm64_python3.12.____cpython"


@pytest.fixture
def fs(tmp_path):
    return make_feedstock(tmp_path)


def one_error_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_help_works_without_site_packages(fs):
    proc = fs.run("--help")
    assert proc.returncode == 0, proc.stderr
    for flag in ("--all", "--filter", "--list", "--dry-run", "--native", "--prune", "--zip-logs",
                 "--keep-going", "--force", "--engine", "--ccache", "--python", "--cuda-arch",
                 "--rocm-arch", "--jobs", "--heavy-jobs", "--debug", "--output-id", "--gpu-tests", "--upload",
                 "exit status"):
        assert flag in proc.stdout


def test_list_describes_each_config(fs):
    proc = fs.run("--list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == sorted(
        [CUDA129, CPU_MKL, CPU_GENERIC, OSX, "linux_64_blas_implmklcuda_compiler_version13.0"])
    cuda = next(line for line in lines if line.startswith(CUDA129))
    assert "linux-64, cuda 12.9, mkl, py 3.10-3.14, megabuild, ~120 GB disk" in cuda
    cpu = next(line for line in lines if line.startswith(CPU_GENERIC))
    assert "cpu, generic" in cpu and "~50 GB disk" in cpu
    osx = next(line for line in lines if line.startswith(OSX))
    assert "osx-arm64" in osx and "py 3.12" in osx and "megabuild" not in osx


def test_list_filter_and_built_marker(fs):
    fs.artifacts.mkdir()
    fs.marker(CPU_MKL).write_text("")
    proc = fs.run("--list", "--filter", "None$", "--filter", "mkl")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"{CPU_MKL}  linux-64, cpu, mkl, py 3.10-3.14, megabuild, ~50 GB disk [built]"]


def test_unknown_config_suggests_closest(fs):
    proc = fs.run("linux_64_blas_implmklcuda_compiler_version12")
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "config 'linux_64_blas_implmklcuda_compiler_version12' not found" in line
    assert f"did you mean {CUDA129}, linux_64_blas_implmklcuda_compiler_version13.0" in line
    assert fs.calls() == []


def test_unknown_config_suggests_names_with_the_typed_start(tmp_path):
    """Generated names differ late: 'linux_64_cud' must point at linux_64 configs, not at the
    aarch64 one that difflib finds most similar."""
    fs = make_feedstock(tmp_path, configs={
        "linux_64_blas_implmklcuda_compiler_version12.9": dict(cuda="12.9", image=CUDA_IMAGE),
        "linux_64_blas_implgenericcuda_compiler_versionNone": dict(blas="generic"),
        "linux_aarch64_": dict(platform="linux-aarch64")})
    proc = fs.run("linux_64_cud")
    assert proc.returncode == 2
    line = one_error_line(proc)
    suggested = line.split("did you mean ", 1)[1].rstrip("?").split(", ")
    assert sorted(suggested[:2]) == ["linux_64_blas_implgenericcuda_compiler_versionNone",
                                     "linux_64_blas_implmklcuda_compiler_version12.9"], line


def test_unknown_config_without_close_match_points_to_list(fs):
    proc = fs.run("win_64_nothing_alike")
    assert proc.returncode == 2
    assert "see --list" in one_error_line(proc)


def test_config_given_as_path_is_accepted(fs):
    proc = fs.run(f".ci_support/{CUDA129}.yaml", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"] {CUDA129}:" in proc.stdout


def test_no_config_without_terminal_lists_choices(fs):
    proc = fs.run()
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "no terminal" in line and CUDA129 in line and OSX in line and "--all" in line


def test_names_and_all_together_is_an_error(fs):
    proc = fs.run(CUDA129, "--all")
    assert proc.returncode == 2
    assert "not both" in one_error_line(proc)


def test_bad_filter_regex_and_no_match(fs):
    proc = fs.run("--all", "--filter", "cuda(")
    assert proc.returncode == 2 and "not a valid regular expression" in one_error_line(proc)
    proc = fs.run("--all", "--filter", "rocm")
    assert proc.returncode == 2 and "no config matches --filter rocm" in one_error_line(proc)


def test_missing_ci_support_says_how_to_generate(tmp_path):
    fs = make_feedstock(tmp_path, configs={})
    proc = fs.run("--list")
    assert proc.returncode == 2
    assert "python -m feedstock rerender" in one_error_line(proc)


def test_unparseable_config_is_one_line_with_file_and_line(tmp_path):
    fs = make_feedstock(tmp_path, configs={"linux_64_ok": {}})
    (fs.root / ".ci_support" / "linux_64_bad.yaml").write_text("python:\n- 3.12\n  - 3.13\n")
    proc = fs.run("--list")
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert ".ci_support/linux_64_bad.yaml line 3: unexpected indentation" in line


def test_menu_on_a_terminal(fs):
    """A real pseudo-terminal: the menu lists the configs and the answer selects one."""
    pty = pytest.importorskip("pty")
    pid, fd = pty.fork()
    if pid == 0:  # child: becomes build-locally.py with the pty as its terminal
        os.chdir(fs.root)
        os.execve(sys.executable, [sys.executable, "-S", "build-locally.py", "--dry-run"],
                  fs.env())
    output = b""
    answered = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
        if not answered and b"Build which?" in output:
            os.write(fd, b"x\n2\n")  # a wrong answer first: it asks again
            answered = True
    _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert f"  1. {CPU_GENERIC}" in text and "~50 GB disk" in text
    assert "not understood: 'x'" in text
    assert f"== [1/1] {CUDA129}:" in text
    assert "dry run: nothing was started or written" in text


def test_dry_run_shows_the_plan_and_runs_nothing(fs):
    env = fs.env(CPU_COUNT="1", CI="true", CONDA_FORGE_DOCKER_RUN_ARGS="--shm-size 2g")
    proc = fs.run("--dry-run", "--all", env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"image:        {CUDA_IMAGE}" in out and f"image:        {CPU_IMAGE}" in out
    assert "command:      docker run --name build-locally-linux_64_blas_implmklcuda_compiler_version12.9-" in out
    assert f"-v {fs.root}:/home/conda/feedstock_root:rw,z" in out
    assert f"-v {fs.root / 'recipe'}:/home/conda/recipe_root:rw,z" in out
    assert "--shm-size 2g" in out
    for line in (f"  CONFIG={CUDA129}", f"  HOST_USER_ID={os.getuid()}", "  CPU_COUNT=1", "  CI=true",
                 "  UPLOAD_PACKAGES=False"):
        assert line in out
    assert f"marker:       {fs.marker(CUDA129)}" in out
    assert f"log:          {fs.artifacts / (CUDA129 + '-log.txt')}" in out
    assert f"python -m feedstock render {CUDA129}" in out   # no renderer in this tree
    assert "skipped:      needs macOS" in out
    assert "--privileged" not in out
    assert fs.calls() == []                  # the engine was not even asked
    assert not fs.artifacts.exists()         # nothing written


def test_dry_run_shows_the_batch_steps_around_the_builds(fs):
    """--prune and --zip-logs act between and after the builds: the plan says what and when."""
    fs.artifacts.mkdir()
    fs.marker(CPU_MKL).write_text("")       # a done config is not built: one prune fewer
    proc = fs.run("--dry-run", "--all", "--prune", "--zip-logs", env=fs.env(CPU_COUNT="1"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-3:] == [
        "between builds: docker system prune --force --filter 'label!=org.pytorch-feedstock.build-locally'"
        " (2 time(s): between the 3 config(s) that build, never before the first or after the last)",
        f"after the batch: logs zipped into {fs.artifacts}/build-logs-<time>.zip"
        " (each config's log + summary.txt)",
        "dry run: nothing was started or written"]
    assert "  CPU_COUNT=1" in proc.stdout
    assert list(fs.artifacts.iterdir()) == [fs.marker(CPU_MKL)] and fs.calls() == []
    plain = fs.run("--dry-run", "--all")
    assert "between builds:" not in plain.stdout and "after the batch:" not in plain.stdout


def test_dry_run_skips_a_done_config_as_the_batch_does(fs):
    """--test-only tests the packages a done config built: its marker does not skip it."""
    fs.artifacts.mkdir()
    fs.marker(CPU_MKL).write_text("")
    assert "skipped:      already built" in fs.run("--dry-run", CPU_MKL).stdout
    proc = fs.run("--dry-run", CPU_MKL, "--test-only")
    assert proc.returncode == 0, proc.stderr
    assert "skipped:" not in proc.stdout and f"marker:       {fs.marker(CPU_MKL)}" in proc.stdout


FAKE_RENDER = """\
import json, os, sys
args = sys.argv[1:]
# `render --batch FILE`: one entry per request, the request's environment set while it renders
requests = json.load(open(args[args.index("--batch") + 1]))
calls = os.environ.get("FAKE_RENDER_CALLS")
if calls:
    with open(calls, "a") as log:
        log.write(json.dumps([r["config"] for r in requests]) + "\\n")


def render(name):
    if "version13" in name:
        return {"error": "cannot render " + name}
    if "generic" in name:   # what the real batch says of a renderer bug: its traceback's last line
        return {"error": "RuntimeError: renderer bug"}
    dev = os.environ.get("FEEDSTOCK_DEV_TAG")
    pre = f"dev{dev}_" if dev else ""
    # a config given by its path (the dry run's copy of the derived config): its own Pythons
    minors = (11, 12)
    if name.endswith(".yaml") and os.path.isfile(name):
        text = open(name).read()
        minors = tuple(m for m in (11, 12) if f"3.{m}.* *_cpython" in text)
    outputs = [dict(name="libtorch", version="2.13.0", build_string=pre + "cuda129_mkl_h1234567_300", variant={})]
    outputs += [dict(name="pytorch", version="2.13.0", build_string=f"{pre}cuda129_py3{m}_h1_300",
                     variant={"python": f"3.{m}.* *_cpython"}) for m in minors]
    return {"outputs": outputs}


results = []
for request in requests:
    saved = dict(os.environ)
    os.environ.update(request.get("environment", {}))
    results.append({"config": request["config"], **render(request["config"])})
    os.environ.clear()
    os.environ.update(saved)
print(json.dumps(results))
sys.exit(1 if any("error" in r for r in results) else 0)
"""


def fake_tools(fs, main: str = FAKE_RENDER) -> None:
    """A `feedstock` package beside build-locally.py whose `python -m feedstock` is `main`."""
    package = fs.root / "feedstock"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(main)


def test_dry_run_uses_the_renderer_when_it_runs(fs):
    """build-locally runs `python -m feedstock render --batch FILE` of the tools beside it (it
    never imports them): every plan's config in one batch on this 2-core machine (one process
    per core at most), never one process per config; a refusal and a crash are one line each."""
    fake_tools(fs)
    calls = fs.root / "render-calls.jsonl"
    proc = fs.run("--dry-run", "--all", isolated=False, env=fs.env(FAKE_RENDER_CALLS=str(calls)))
    assert proc.returncode == 0, proc.stderr
    batches = [json.loads(line) for line in calls.read_text().splitlines()]
    assert sorted(name for batch in batches for name in batch) == sorted(
        name for name in STANDARD_CONFIGS if not name.startswith("osx"))
    assert len(batches) <= min(2, len(os.sched_getaffinity(0)))
    assert ("outputs:      3\n  libtorch-2.13.0-cuda129_mkl_h1234567_300\n"
            "  pytorch-2.13.0-cuda129_py311_h1_300\n  pytorch-2.13.0-cuda129_py312_h1_300") in proc.stdout
    assert "cannot render (cannot render linux_64_blas_implmklcuda_compiler_version13.0)" in proc.stdout
    assert "cannot render (RuntimeError: renderer bug)" in proc.stdout
    # a dev build: what the run renders, its derived config (3.12 only) with its FEEDSTOCK_DEV_TAG
    # (the shell's stale value never reaches the render)
    proc = fs.run("--dry-run", CUDA129, "--python", "3.12", isolated=False,
                  env=fs.env(FEEDSTOCK_DEV_TAG="stale"))
    assert proc.returncode == 0, proc.stderr
    assert ("outputs:      2\n"
            "  libtorch-2.13.0-devpy312_cuda129_mkl_h1234567_300\n"
            "  pytorch-2.13.0-devpy312_cuda129_py312_h1_300\n") in proc.stdout
    # --channel alone derives a config too, for a release build of every Python
    channel = fs.root / "site-channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_text('{"packages": {}}')
    proc = fs.run("--dry-run", CUDA129, "--channel", str(channel), isolated=False)
    assert proc.returncode == 0, proc.stderr
    assert ("outputs:      3\n  libtorch-2.13.0-cuda129_mkl_h1234567_300\n"
            "  pytorch-2.13.0-cuda129_py311_h1_300\n  pytorch-2.13.0-cuda129_py312_h1_300") in proc.stdout


def test_dry_run_with_tools_that_cannot_start_still_works(fs):
    fake_tools(fs, "import jinja2_not_installed_here\n")
    proc = fs.run("--dry-run", CUDA129, isolated=False)
    assert proc.returncode == 0, proc.stderr
    assert "not rendered here (renderer unavailable: ModuleNotFoundError" in proc.stdout


def test_a_renderer_that_fails_whole_fails_each_config_with_its_line(fs):
    """A batch process that dies (a bug before any config rendered) is every one of its configs'
    `cannot render` line, as each config's own process failing was; the dry run goes on."""
    fake_tools(fs, "raise RuntimeError('renderer bug')\n")
    proc = fs.run("--dry-run", "--all", isolated=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("outputs:")]
    assert len(lines) == 4 and all(line.startswith("outputs:      cannot render (RuntimeError: renderer bug); run `")
                                   for line in lines), lines
    assert "dry run: nothing was started or written" in proc.stdout


HANGING_RENDER = """\
import os, time
with open(os.environ["FAKE_RENDER_PIDS"], "a") as pids:
    pids.write(f"{os.getpid()}\\n")
time.sleep(120)
"""


def test_sigterm_while_rendering_stops_the_renderers_and_leaves_nothing(fs, tmp_path):
    """Stopped while its renderers run (a scheduler's SIGTERM to build-locally alone), the dry
    run ends with its one line and 130 at once: no renderer outlives it, no scratch folder stays."""
    fake_tools(fs, HANGING_RENDER)
    pids, scratch = tmp_path / "render-pids", tmp_path / "scratch"
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, str(fs.root / "build-locally.py"), "--dry-run", "--all"],
                            cwd=fs.root, env=fs.env(FAKE_RENDER_PIDS=str(pids), TMPDIR=str(scratch)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    expected = min(2, len(os.sched_getaffinity(0)))   # 4 configs: one renderer per core, 2 at most
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(pids.read_text().splitlines()) if pids.exists() else 0) < expected:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines() == ["build-locally: interrupted"]
    for pid in map(int, pids.read_text().split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert list(scratch.iterdir()) == []


def test_heavy_jobs_reach_the_build_and_keep_a_release_build(fs):
    proc = fs.run("--dry-run", CUDA129, "--jobs", "8", "--heavy-jobs", "2")
    assert proc.returncode == 0, proc.stderr
    assert "FEEDSTOCK_MAX_JOBS=8" in proc.stdout and "FEEDSTOCK_HEAVY_JOBS=2" in proc.stdout
    assert "FEEDSTOCK_DEV_TAG" not in proc.stdout  # how fast, not what: no dev build


def test_dry_run_python_subset_writes_nothing(fs):
    proc = fs.run("--dry-run", CUDA129, "--python", "3.12", "--cuda-arch", "9.0")
    assert proc.returncode == 0, proc.stderr
    derived = fs.artifacts / "localbuild" / f"{CUDA129}-devpy312sm90.yaml"
    assert f"config:       {derived} (would be written" in proc.stdout
    assert "FEEDSTOCK_DEV_TAG=py312sm90" in proc.stdout
    assert "FEEDSTOCK_CUDA_ARCH_LIST=9.0" in proc.stdout
    assert f"marker:       {fs.marker(CUDA129)}-devpy312sm90" in proc.stdout
    assert not fs.artifacts.exists()


@pytest.mark.parametrize("args, words", [
    (["--python", "3.9.1"], "--python '3.9.1'"),
    (["--python", "3.9"], "no python 3.9"),
    # a free-threaded Python the config does not build (these test configs have no 3.14t)
    (["--python", "3.14t"], "no python 3.14t: the config builds 3.10, 3.11, 3.12, 3.13, 3.14"),
    # an arch this config's CUDA (12.9) cannot build: refused before anything starts
    (["--cuda-arch", "9.0;13.5"], "CUDA 12.9 cannot build compute capability 13.5"),
    (["--cuda-arch", "sm_90"], "--cuda-arch 'sm_90'"),
    (["--rocm-arch", "mi250"], "--rocm-arch 'mi250'"),
    (["--jobs", "0"], "--jobs 0"),
    (["--heavy-jobs", "0"], "--heavy-jobs 0: the heavy targets' job pool needs 1 to 1024"),
    (["--jobs", "9" * 20], "--jobs 999999... (20 digits): give 1 to 1024 parallel compiles"),
    (["--heavy-jobs", "1025"], "--heavy-jobs 1025"),
    (["--dev-tag", "a-b"], "--dev-tag 'a-b'"),
    (["--output-id", "pytorch*"], "--output-id works with --debug only"),
    (["--upload"], "--upload needs BINSTAR_TOKEN"),
])
def test_bad_override_values(fs, args, words):
    proc = fs.run(CUDA129, "--dry-run", *args)
    assert proc.returncode == 2, proc.stdout
    assert words in one_error_line(proc)


@pytest.mark.parametrize("value", ["nan", "-3", "inf", "lots"])
def test_bad_min_free_gb_is_refused(fs, value):
    proc = fs.run(CPU_MKL, "--min-free-gb", value)
    assert proc.returncode == 2
    assert f"argument --min-free-gb: {value!r} is not a number of GB" in proc.stderr
    assert "Traceback" not in proc.stderr and fs.runs() == []


def test_upload_with_only_the_staging_token_is_refused(fs):
    """build_steps.sh uploads with BINSTAR_TOKEN/ANACONDA_API_TOKEN only; a staging token
    alone would pass here and fail after the whole build."""
    proc = fs.run(CUDA129, "--upload", "--min-free-gb", "0",
                  env=fs.env(STAGING_BINSTAR_TOKEN="staging-secret"))
    assert proc.returncode == 2, proc.stdout
    assert "--upload needs BINSTAR_TOKEN or ANACONDA_API_TOKEN" in one_error_line(proc)
    assert fs.runs() == []


def test_debug_needs_exactly_one_config(fs):
    proc = fs.run("--all", "--filter", "linux", "--debug")
    assert proc.returncode == 2
    assert "--debug works on one config; 4 selected" in one_error_line(proc)


def test_only_osx_configs_on_linux_is_an_error(fs):
    if sys.platform == "darwin":
        pytest.skip("on macOS the osx config is buildable")
    proc = fs.run(OSX)
    assert proc.returncode == 2
    assert "nothing this machine can build" in one_error_line(proc) and "needs macOS" in proc.stderr


# --- preflight: one line, exit 3, nothing started -------------------------------------------

def test_engine_client_missing(fs):
    proc = fs.run(CPU_MKL, env=fs.env(DOCKER_EXECUTABLE="no-such-docker-client"))
    assert proc.returncode == 3
    line = one_error_line(proc)
    assert "'no-such-docker-client' not found on PATH" in line and "--dry-run" in line


def test_podman_without_docker_is_found_by_itself(fs, tmp_path):
    """The README's first command on a podman-only machine: no --engine needed."""
    system_path = os.pathsep.join(("/usr/bin", "/bin"))  # sh for the fake engine's wrapper
    if shutil.which("docker", path=system_path):
        pytest.skip("a docker client is in /usr/bin here; the podman-only machine cannot be shown")
    only = tmp_path / "only-podman"
    only.mkdir()
    shutil.copy2(fs.bin_dir / "podman", only / "podman")
    env = fs.env()
    env["PATH"] = f"{only}{os.pathsep}{system_path}"
    dry = fs.run(CPU_MKL, "--dry-run", env=env)
    assert dry.returncode == 0 and "command:      podman run " in dry.stdout, dry.stdout
    proc = fs.run(CPU_MKL, "--min-free-gb", "0", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [call["exe"] for call in fs.runs()] == ["podman"]


def test_real_docker_client_without_engine(fs):
    """This machine's real docker client with no daemon: the same one-line error."""
    real = shutil.which("docker")
    if real is None:
        pytest.skip("no docker client installed")
    if subprocess.run([real, "info"], capture_output=True, timeout=60).returncode == 0:
        pytest.skip("a Docker engine is running here; the unreachable case cannot be shown")
    proc = fs.run(CPU_MKL, env=fs.env(DOCKER_EXECUTABLE=real))
    assert proc.returncode == 3
    line = one_error_line(proc)
    assert "engine not reachable" in line and "--dry-run" in line
    assert "--engine podman" in line  # a machine with podman and a docker client only


def test_too_little_disk(fs):
    proc = fs.run(CPU_MKL, "--min-free-gb", "1e9")
    assert proc.returncode == 3
    line = one_error_line(proc)
    assert "GB free" in line and "--min-free-gb needs about 1000000000 GB" in line
    assert fs.runs() == []


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)], ids=["run", "dry-run"])
def test_cpu_count_above_cores(fs, dry_run):
    """The run and its dry run refuse a CPU_COUNT with the same line."""
    proc = fs.run(CPU_MKL, *dry_run, env=fs.env(CPU_COUNT=str((os.cpu_count() or 1) + 64)))
    assert proc.returncode == 3
    assert "usable cores" in one_error_line(proc)
    proc = fs.run(CPU_MKL, *dry_run, env=fs.env(CPU_COUNT="many"))
    assert proc.returncode == 3
    assert "not a positive number" in one_error_line(proc)
    assert fs.runs() == []


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)], ids=["run", "dry-run"])
def test_gpu_tests_on_cpu_configs_only_is_refused(fs, dry_run):
    """The run would give no container a GPU: refused, in the dry run as in the run."""
    proc = fs.run(CPU_MKL, CPU_GENERIC, "--gpu-tests", *dry_run)
    assert proc.returncode == 2
    assert "every selected config is a CPU one; drop --gpu-tests" in one_error_line(proc)
    assert fs.runs() == []
    assert fs.run(CPU_MKL, CUDA129, "--gpu-tests", "--dry-run").returncode == 0


def test_native_without_conda_build(fs, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = fs.env(PATH=f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin")
    if shutil.which("conda-build", path=env["PATH"]) or shutil.which("rattler-build", path=env["PATH"]):
        pytest.skip("conda-build / rattler-build installed system-wide")
    proc = fs.run(CPU_MKL, "--native", env=env)
    assert proc.returncode == 3
    line = one_error_line(proc)
    assert "--native needs conda-build >= 25.3 on PATH" in line and "rattler-build" in line


def test_other_architecture_needs_emulate(tmp_path):
    from localbuild.configs import host_platform

    other = "linux-64" if host_platform() != "linux-64" else "linux-aarch64"
    name = f"{other.replace('-', '_')}_x"
    fs = make_feedstock(tmp_path, configs={name: dict(platform=other)})
    proc = fs.run(name, "--dry-run")
    assert proc.returncode == 2
    assert f"needs a {other} host" in one_error_line(proc) and "--emulate" in proc.stderr
    proc = fs.run(name, "--dry-run", "--emulate")
    assert proc.returncode == 0, proc.stderr
    assert "command:      docker run " in proc.stdout


def test_the_help_examples_filter_selects_what_it_says():
    """On the real .ci_support/: the --filter example of --help selects every CUDA config and
    nothing else (before: `--filter cuda` matched 12 of 13, CPU and ROCm included)."""
    from localbuild.cli import EPILOG

    line = next(line for line in EPILOG.splitlines() if "--all --filter" in line)
    pattern = line.split("--filter")[1].split()[0]
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "build-locally.py"), "--list", "--filter", pattern],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    listed = [row.split()[0] for row in proc.stdout.splitlines()]
    every = [path.stem for path in (REPO_ROOT / ".ci_support").glob("*.yaml")]
    assert sorted(listed) == sorted(name for name in every if "gpu_backendcuda" in name), proc.stdout
    assert "every CUDA config" in line


@pytest.mark.parametrize("breakage, needle", [
    (lambda p: p.write_text(""), "has no target_platform (is it empty?)"),
    (lambda p: (p.unlink(), p.mkdir()), "a folder, not a regular file"),
    # refused before a byte is read: a FIFO would block --list forever, /dev/zero fill the memory
    (lambda p: (p.unlink(), os.mkfifo(p)), "a FIFO, not a regular file"),
    (lambda p: (p.unlink(), p.symlink_to("/dev/zero")), "a character device, not a regular file"),
    (lambda p: p.write_text("target_platform:\n- linux-64\nx:\n" + "- " * 100_000 + "a\n"),
     "line 4: nested more than 16 levels deep"),
    (lambda p: (p.unlink(), p.symlink_to(p.name)), "Too many levels of symbolic links"),
    (lambda p: p.write_bytes(b"target_platform:\n- linux-64\n# caf\xe9\n"), ":3: byte 0xe9 is not UTF-8 text"),
    # nine keys of nine values: the build tools would render 9^9 variants
    (lambda p: p.write_text(p.read_text() + "".join(f"zz_{k}:\n" + "".join(f"- v{v}\n" for v in range(9))
                                                    for k in range(9))),
     "combinations (the limit is 2,048), from zz_0 (9 values) x zz_1 (9 values)"),
])
def test_list_refuses_a_broken_config_file(fs, breakage, needle):
    # before: an empty, folder or looping config was listed (or left out) and --list exited 0
    path = fs.root / ".ci_support" / f"{CPU_GENERIC}.yaml"
    breakage(path)
    proc = fs.run("--list")
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert f".ci_support/{CPU_GENERIC}.yaml" in line and needle in line, line


@pytest.mark.parametrize("args, needle", [
    (("--channel", "my channel"), "a channel name or URL has no spaces"),
    (("--scheduler", "slurm", "--gpus", "-1"), "--gpus '-1': give a count or TYPE:COUNT"),
    (("--scheduler", "slurm", "--gpus", "a100:0"), "--gpus 'a100:0'"),
])
def test_bad_option_values_are_refused_up_front(fs, args, needle):
    proc = fs.run(CPU_GENERIC, "--dry-run", *args)
    assert proc.returncode == 2 and needle in one_error_line(proc)


def test_a_compile_cache_that_is_a_file_is_refused(fs, tmp_path):
    not_a_folder = tmp_path / "cache.txt"
    not_a_folder.write_text("")
    proc = fs.run(CPU_GENERIC, "--dry-run", "--compile-cache", str(not_a_folder))
    assert proc.returncode == 2 and "is a file; a folder belongs there; give a folder" in one_error_line(proc)


@pytest.mark.parametrize("content", [b"{not json", b"caf\xe9", b"[1, 2]"])
def test_a_local_channel_with_a_broken_index_is_refused_before_any_build(fs, tmp_path, content):
    # before: accepted, to fail inside the container after the image was pulled
    channel = tmp_path / "channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_bytes(content)
    before = (channel / "noarch" / "repodata.json").read_bytes()
    proc = fs.run(CPU_GENERIC, "--dry-run", "--channel", str(channel))
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert f"{channel}/noarch/repodata.json is not" in line and "index the channel again" in line
    assert (channel / "noarch" / "repodata.json").read_bytes() == before


def test_a_folder_where_the_previous_log_goes_is_a_preflight_error(fs):
    # before: the config failed (exit 1) blamed on <config>-log.txt, after the others built
    (fs.artifacts / f"{CPU_GENERIC}-log.previous.txt").mkdir(parents=True)
    (fs.artifacts / f"{CPU_GENERIC}-log.txt").write_text("last run\n")
    proc = fs.run(CPU_GENERIC, "--engine", "docker", "--min-free-gb", "0")
    assert proc.returncode == 3
    line = one_error_line(proc)
    assert f"{CPU_GENERIC}-log.previous.txt is a folder" in line and "move it away" in line
    assert (fs.artifacts / f"{CPU_GENERIC}-log.txt").read_text() == "last run\n"
