"""--scheduler slurm without a cluster: the options' checks, the dry run's scripts and command
lines, the preflight without Slurm, the task side's row, and the parsing of scontrol's answers.
The real cluster runs in tests/localbuild/slurm/test_slurm_array.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localbuild.location.apptainer import gpu_arguments
from localbuild.batch import Row
from localbuild.errors import LocalBuildError
from localbuild.slurm.client import TaskState, parse_show_job
from localbuild.slurm.options import check_time, parse_slurm_options
from localbuild.slurm.summary import exit_status, task_row, write_result
from tests.support.build_locally import fake_conda_packages, install_fake_conda, make_feedstock, read_jsonl

CPU_GENERIC = "linux_64_blas_implgenericcuda_compiler_versionNone"
CUDA = "linux_64_blas_implmklcuda_compiler_version12.9"


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize("value", ["30", "30:00", "6:00:00", "1-12", "1-12:30", "2-00:00:00",
                                   "UNLIMITED"])
def test_slurm_times_are_accepted(value):
    assert check_time(value) == value


@pytest.mark.parametrize("value", ["2h", "1:2:3:4", "-5", "1-", "", "six hours"])
def test_other_times_are_one_clear_error(value):
    with pytest.raises(LocalBuildError) as err:
        check_time(value)
    assert "is not a Slurm time" in str(err.value) and err.value.exit_code == 2


def test_sbatch_arguments_split_like_a_shell_and_refuse_what_build_locally_sets():
    slurm = parse_slurm_options("gpu", "proj1", "12:00:00", 8, "64G", "a100:1",
                                ["--qos high", "--constraint=zen3"])
    assert slurm.sbatch_arguments() == [
        "--partition=gpu", "--account=proj1", "--time=12:00:00", "--mem=64G", "--gpus=a100:1",
        "--cpus-per-task=8", "--qos", "high", "--constraint=zen3"]
    for bad in (["--array=0-3"], ["--dependency=afterok:1"]):
        with pytest.raises(LocalBuildError, match="leave them out"):
            parse_slurm_options(None, None, None, None, None, None, bad)
    with pytest.raises(LocalBuildError, match="not a Slurm memory size"):
        parse_slurm_options(None, None, None, None, "lots", None, None)


def test_scontrol_lines_become_task_states():
    output = ("JobId=7 ArrayJobId=5 ArrayTaskId=2 JobState=FAILED Reason=NonZeroExitCode "
              "ExitCode=1:0 RunTime=00:01:05\n"
              "JobId=5 ArrayJobId=5 ArrayTaskId=3-4 JobState=PENDING ExitCode=0:0 RunTime=00:00:00\n"
              "JobId=9 JobState=COMPLETED ExitCode=0:0 RunTime=1-00:00:02\n")
    states = parse_show_job(output)
    assert states == [TaskState(2, "FAILED", "1:0", 65), TaskState(3, "PENDING", "0:0", 0),
                      TaskState(4, "PENDING", "0:0", 0), TaskState(None, "COMPLETED", "0:0", 86402)]
    assert states[0].finished and not states[1].finished


def test_a_task_s_row_prefers_slurm_s_cancel_then_the_build_s_own_row(tmp_path):
    log = tmp_path / "cfg-log.txt"
    write_result(tmp_path, Row("cfg", "ok", 12.0, 4, log))
    assert task_row(tmp_path, "cfg", log, TaskState(0, "COMPLETED", "0:0", 13)).result == "ok"
    assert task_row(tmp_path, "cfg", log, TaskState(0, "CANCELLED", "0:15", 13)).result.startswith("cancelled")
    timed_out = task_row(tmp_path, "other", log, TaskState(1, "TIMEOUT", "0:15", 600))
    assert timed_out.result == "failed (TIMEOUT, exit 0:15)" and timed_out.log == log
    assert exit_status([Row("a", "ok"), Row("b", "skipped (done)")]) == 0
    assert exit_status([Row("a", "ok"), timed_out]) == 1


@pytest.fixture
def fs(tmp_path):
    return make_feedstock(tmp_path)


def test_dry_run_prints_the_scripts_and_command_lines_and_writes_nothing(fs):
    fs.artifacts.mkdir()
    fs.marker(CUDA).write_text("")
    proc = fs.run("--filter", "linux_64", "--scheduler", "slurm", "--partition", "gpu",
                  "--gpus", "1", "--time", "1-12", "--sbatch-arg", "--qos high",
                  "--compile-cache", "redis://cache.example.org:6379", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"not submitted: {CUDA}: skipped (done)" in out
    assert "array: 3 task(s)" in out and f"  task 0: {CPU_GENERIC}" in out
    # each task runs the local per-config build with the submitter's options (job.json):
    # --native by default, the cache passed on
    task_line = next(line for line in out.splitlines() if line.startswith("exec "))
    assert '"$config" --force --array-task ' in task_line
    lines = out.splitlines()
    options = json.loads(lines[next(i for i, line in enumerate(lines) if "build_request" in line) + 1])
    assert options["native"] is True and options["compile_cache"] == "redis://cache.example.org:6379"
    assert "sbatch --parsable --array=0-2 --job-name=build-locally" in out
    assert "--partition=gpu --time=1-12 --gpus=1 --qos high " in out
    assert "'--dependency=afterany:<ARRAY_ID>'" in out and "localbuild.slurm.finish" in out
    assert out.rstrip().endswith("dry run: nothing was submitted or written")
    assert sorted(p.name for p in fs.artifacts.iterdir()) == [fs.marker(CUDA).name]


def test_slurm_options_need_the_scheduler(fs):
    proc = fs.run(CPU_GENERIC, "--partition", "gpu")
    assert proc.returncode == 2
    assert one_error_line(proc) == "error: --partition works with --scheduler slurm only"


def test_an_unreachable_controller_is_one_line(fs, tmp_path):
    if subprocess.run(["sh", "-c", "command -v sbatch"], capture_output=True).returncode != 0:
        pytest.skip("no sbatch here (apt-get install slurm-client)")
    conf = tmp_path / "slurm.conf"   # a controller nobody runs, on a port nobody listens on
    conf.write_text("ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n"
                    "AuthType=auth/none\nCredType=cred/none\nNodeName=localhost CPUs=1\n"
                    "PartitionName=p Nodes=localhost Default=YES\n")
    proc = fs.run(CPU_GENERIC, "--scheduler", "slurm", env=fs.env(SLURM_CONF=str(conf)),
                  timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "the Slurm controller is not reachable" in one_error_line(proc)
    assert not fs.artifacts.exists()


def _job_file(job_dir: Path, **build_request) -> None:
    """The job.json a submitting run writes, with these request fields over the defaults."""
    from localbuild.engine import Engine
    from localbuild.request import BuildRequest

    job_dir.mkdir(parents=True, exist_ok=True)
    engine = Engine(build_request.pop("engine", "docker"))
    request = BuildRequest(engine=engine, **build_request).to_json()
    (job_dir / "job.json").write_text(json.dumps({"build_request": request}))


def test_a_task_without_the_submitters_options_is_one_line(fs):
    proc = fs.run(CPU_GENERIC, "--force", "--array-task", str(fs.artifacts / "slurm" / "x"))
    assert proc.returncode == 2 and "its job.json has no readable build_request" in one_error_line(proc)


def test_array_task_builds_without_indexing_and_leaves_its_row(fs, tmp_path):
    """The task side, with the fake engine: SKIP_INDEX reaches the build, the row is written."""
    job_dir = fs.artifacts / "slurm" / "x"
    _job_file(job_dir, engine="docker")
    proc = fs.run(CPU_GENERIC, "--force", "--array-task", str(job_dir), "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = fs.runs()
    assert "SKIP_INDEX=1" in run["argv"]
    row = json.loads((job_dir / "results" / f"{CPU_GENERIC}.json").read_text())
    assert row["name"] == CPU_GENERIC and row["result"] == "ok"
    assert not (fs.artifacts / ".build-locally.lock").exists()   # tasks take no batch lock


# --- --engine apptainer, with a recording fake (Apptainer cannot be installed here) ----------

FAKE_APPTAINER = Path(__file__).resolve().parents[2] / "support" / "fake_docker" / "fake_apptainer.py"


@pytest.fixture
def apptainer(fs, tmp_path):
    wrapper = fs.bin_dir / "apptainer"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{FAKE_APPTAINER}" "$@"\n')
    wrapper.chmod(0o755)
    return tmp_path / "apptainer-calls.jsonl"


def _calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_apptainer_exec_binds_the_feedstock_as_docker_mounts_it(fs, apptainer):
    env = fs.env(FAKE_APPTAINER_LOG=str(apptainer), BINSTAR_TOKEN="tok-123",
                 FEEDSTOCK_COMPILE_CACHE_PASSWORD="pw-456")
    proc = fs.run(CUDA, "--engine", "apptainer", "--gpu-tests", "--compile-cache",
                  "redis://cache:6379", "--upload", "--min-free-gb", "0", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [call] = _calls(apptainer)
    argv = call["argv"]
    assert argv[:6] == ["exec", "--cleanenv", "--no-home", "--writable-tmpfs", "--pwd",
                        "/home/conda/feedstock_root"]
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    assert binds == [f"{fs.root}:/home/conda/feedstock_root:rw",
                     f"{fs.root / 'recipe'}:/home/conda/recipe_root:rw"]
    assert "--nv" in argv
    assert argv[-3:] == ["docker://quay.io/condaforge/linux-anvil-x86_64-cuda12:alma9", "bash",
                         "/home/conda/feedstock_root/localbuild/in_container/build_steps.sh"]
    assert "--env" in argv and "FEEDSTOCK_COMPILE_CACHE=redis://cache:6379" in argv
    # secrets by name: their values only in APPTAINERENV_*, never on the command line
    assert call["secrets"] == {"BINSTAR_TOKEN": "tok-123", "FEEDSTOCK_COMPILE_CACHE_PASSWORD": "pw-456"}
    assert not any("tok-123" in a or "pw-456" in a for a in argv)
    assert fs.marker(CUDA).exists() and fs.runs() == []


def test_apptainer_with_a_local_sif(fs, apptainer, tmp_path):
    sif = tmp_path / "site-image.sif"
    sif.write_text("")
    proc = fs.run(CPU_GENERIC, "--engine", "apptainer", "--apptainer-image", str(sif),
                  "--dry-run", env=fs.env(FAKE_APPTAINER_LOG=str(apptainer)))
    assert proc.returncode == 0, proc.stderr
    command = next(line for line in proc.stdout.splitlines() if line.startswith("command:"))
    assert f" {sif} bash /home/conda/feedstock_root/localbuild/in_container/build_steps.sh" in command
    assert "location:     apptainer" in proc.stdout
    assert _calls(apptainer) == []


def test_apptainer_gpu_flags():
    assert gpu_arguments("cuda") == ["--nv"] and gpu_arguments("rocm") == ["--rocm"]
    assert gpu_arguments("cpu") == []


BAD_INPUT = {
    # no sbatch on PATH (only the fake engines)
    "no slurm": ((CPU_GENERIC, "--scheduler", "slurm", "--min-free-gb", "0"), True, 3,
                 "needs the Slurm client (sbatch, scontrol)"),
    "bad time": ((CPU_GENERIC, "--scheduler", "slurm", "--time", "2h"), False, 2,
                 "--time '2h' is not a Slurm time"),
    "no apptainer": ((CPU_GENERIC, "--engine", "apptainer", "--min-free-gb", "0"), False, 3,
                     "'apptainer' not found on PATH"),
    "missing sif": ((CPU_GENERIC, "--engine", "apptainer", "--apptainer-image", "/nope.sif"),
                    False, 2, "--apptainer-image /nope.sif: no such file"),
}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_is_one_line_and_writes_nothing(fs, case):
    args, bare_path, code, message = BAD_INPUT[case]
    proc = fs.run(*args, env=fs.env(PATH=str(fs.bin_dir)) if bare_path else None)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert message in one_error_line(proc)
    assert not fs.artifacts.exists()


# --- localbuild/in_container/build_steps.sh: the tasks skip the index, the final job only indexes -----------

def _steps(fs, tmp_path, **extra: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    install_fake_conda(fs.bin_dir)
    calls = tmp_path / "conda-calls.jsonl"
    env = fs.env(FEEDSTOCK_ROOT=str(fs.root), RECIPE_ROOT=str(fs.root / "recipe"),
                 CONFIG=CPU_GENERIC, LOCALBUILD_NATIVE="1", FAKE_CONDA_LOG=str(calls), **extra)
    proc = subprocess.run(["bash", str(fs.root / "localbuild" / "in_container" / "build_steps.sh")], env=env,
                          cwd=fs.root, capture_output=True, text=True, timeout=60)
    commands = [c["argv"][0] + (" --help" if "--help" in c["argv"] else "") for c in read_jsonl(calls)]
    return proc, commands


def test_build_steps_of_a_task_build_apart_move_the_packages_and_skip_the_index(fs, tmp_path):
    own = fs.artifacts / "slurm" / "x" / "work" / CPU_GENERIC
    proc, commands = _steps(fs, tmp_path, SKIP_INDEX="1", TASK_OUTPUT_DIR=str(own))
    assert proc.returncode == 0, proc.stderr
    assert commands == ["build"]
    assert "SKIP_INDEX=1" in proc.stdout and fs.marker(CPU_GENERIC).exists()
    built = sorted(p.name for p in (fs.artifacts / "linux-64").iterdir())
    assert built == sorted(fake_conda_packages(CPU_GENERIC))
    assert sorted(line.split(":: ")[1] for line in proc.stdout.splitlines()
                  if line.startswith("::build-locally-package::")) == [f"linux-64/{n}" for n in built]
    assert not own.exists()


def test_a_failed_task_build_keeps_its_folder(fs, tmp_path):
    own = fs.artifacts / "slurm" / "x" / "work" / CPU_GENERIC
    proc, _ = _steps(fs, tmp_path, SKIP_INDEX="1", TASK_OUTPUT_DIR=str(own), FAKE_CONDA_BUILD_FAIL="1")
    assert proc.returncode != 0
    assert own.is_dir() and not fs.marker(CPU_GENERIC).exists()


def test_build_steps_index_only_indexes_even_without_the_config_file(fs, tmp_path):
    fs.artifacts.mkdir()   # the tasks made it
    proc, commands = _steps(fs, tmp_path, INDEX_ONLY="1", CONFIG_FILE=str(tmp_path / "gone.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert commands == ["index --help", "index"]
    assert not fs.marker(CPU_GENERIC).exists()


# every developer override, by BuildRequest field, and the flag that sets it
OVERRIDE_FLAGS = {"pythons": ["--python", "3.12"], "cuda_arch": ["--cuda-arch", "9.0"],
                  "rocm_arch": ["--rocm-arch", "gfx90a"], "jobs": ["--jobs", "8"],
                  "heavy_jobs": ["--heavy-jobs", "2"], "compile_cache": ["--compile-cache", "/tmp/ccache-dir"],
                  "compile_cache_read_only": ["--compile-cache-read-only"], "dev_tag": ["--dev-tag", "mine"]}


def test_the_request_survives_job_json_and_a_broken_one_is_refused():
    """Every BuildRequest field goes through to_json and back (a new field cannot be forgotten:
    from_json needs them all), and a job.json short of one is refused."""
    import dataclasses

    from localbuild.engine import Engine
    from localbuild.request import BuildRequest

    request = BuildRequest(engine=Engine("podman"), native=True, tool="rattler-build", channels=("/c",),
                           source_tarball=Path("/t.tar.gz"), apptainer_image="/i.sif", emulate=True,
                           skip_tests=True, test_only=True, gpu_tests=True, upload=True, output_id="pytorch",
                           pythons=("3.12", "3.13t"), cuda_arch="9.0", rocm_arch="gfx90a", jobs=8, heavy_jobs=2,
                           compile_cache="/cc", compile_cache_read_only=True, dev_tag="mine",
                           develop=Path("/src/pytorch"), shell=True)
    assert all(getattr(request, f.name) != f.default for f in dataclasses.fields(BuildRequest))
    assert BuildRequest.from_json(json.loads(json.dumps(request.to_json()))) == request
    data = request.to_json()
    del data["heavy_jobs"]
    with pytest.raises(ValueError, match="no heavy_jobs"):
        BuildRequest.from_json(data)


def test_every_build_option_reaches_the_slurm_task(tmp_path):
    """Issue 25: the task's flags were rebuilt by hand and --heavy-jobs was dropped. Now the
    submitting run serializes its resolved request once (job.json's build_request) and the task
    builds with it: every override and every other build option arrives."""
    import dataclasses

    from localbuild.request import BuildRequest

    assert set(OVERRIDE_FLAGS) <= {f.name for f in dataclasses.fields(BuildRequest)}
    rocm, cuda = "linux_64_blas_implgenericrocm_version7.2", "linux_64_blas_implmklcuda_compiler_version13.0"
    fs = make_feedstock(tmp_path, configs={rocm: dict(rocm="7.2", blas="generic"), cuda: dict(cuda="13.0")})
    channel = tmp_path / "channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_text('{"packages": {}}')
    given = [word for words in OVERRIDE_FLAGS.values() for word in words]
    others = ["--channel", str(channel), "--skip-tests", "--engine", "docker", "--tool", "rattler-build"]
    proc = fs.run(rocm, cuda, "--scheduler", "slurm", "--python", "3.13", "--python", "3.12", *given, *others,
                  "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    options = json.loads(lines[next(i for i, line in enumerate(lines) if "build_request" in line) + 1])
    task_line = next(line for line in lines if line.startswith("exec "))
    assert "--heavy-jobs" not in task_line and "--array-task" in task_line   # no flags rebuilt by hand
    assert {key: options[key] for key in OVERRIDE_FLAGS} == {
        "pythons": ["3.13", "3.12"], "cuda_arch": "9.0", "rocm_arch": "gfx90a", "jobs": 8, "heavy_jobs": 2,
        "compile_cache": "/tmp/ccache-dir", "compile_cache_read_only": True, "dev_tag": "mine"}
    assert (options["engine"], options["tool"], options["skip_tests"], options["channels"]) == \
        ("docker", "rattler-build", True, [str(channel)])
    # the task side: with that job.json, the task's own plan carries every value
    job_dir = fs.artifacts / "slurm" / "task-test"
    job_dir.mkdir(parents=True)
    (job_dir / "job.json").write_text(json.dumps({"build_request": options}))
    task = fs.run(cuda, "--force", "--array-task", str(job_dir), "--min-free-gb", "0", "--dry-run")
    assert task.returncode == 0, task.stderr
    for shown in ("FEEDSTOCK_HEAVY_JOBS=2", "FEEDSTOCK_MAX_JOBS=8", "FEEDSTOCK_CUDA_ARCH_LIST=9.0",
                  "FEEDSTOCK_DEV_TAG=mine", "FEEDSTOCK_COMPILE_CACHE_READ_ONLY=1", "BUILD_TOOL=rattler-build",
                  "SKIP_TESTS=1", "-v /tmp/ccache-dir:/home/conda/compile-cache", f"CHANNEL_SOURCES={channel}",
                  "docker run "):
        assert shown in task.stdout, (shown, task.stdout)
