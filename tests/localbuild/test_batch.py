"""build-locally.py batches against the fake container engine: real processes, files, signals.

The recording fake stays for what no engine here can show (GPU device flags: --gpus, CDI
devices, ROCm's /dev/kfd and groups) and for the batch's own logic with builds that take no
time (markers, order, prune placement, tokens, logs). What a real engine shows is tested with
one: container removal and kept containers with their enter lines, SIGINT, prune, an engine that
is unreachable or dies mid-batch (tests/localbuild/test_docker_build.py, test_docker_engine.py,
test_podman_build.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.support.build_locally import (CPU_IMAGE, CUDA_IMAGE, TOKENS, fake_conda_packages, install_fake_conda,
                                         make_feedstock, option_values, read_jsonl, summary_rows)

CUDA129 = "linux_64_blas_implmklcuda_compiler_version12.9"
CUDA130 = "linux_64_blas_implmklcuda_compiler_version13.0"
CPU_MKL = "linux_64_blas_implmklcuda_compiler_versionNone"
CPU_GENERIC = "linux_64_blas_implgenericcuda_compiler_versionNone"
OSX = "osx_arm64_python3.12.____cpython"
LINUX = sorted([CPU_GENERIC, CUDA129, CUDA130, CPU_MKL])


@pytest.fixture
def fs(tmp_path):
    return make_feedstock(tmp_path)


def plan(**actions: str) -> str:
    return json.dumps(actions)


def test_batch_keeps_going_logs_and_summarises(fs):
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{CUDA129: "fail"}))
    proc = fs.run("--all", "--min-free-gb", "0", env=env)
    assert proc.returncode == 1, proc.stderr
    rows = summary_rows(proc.stdout)
    assert rows[CUDA129][0] == "failed (exit 7: error: compiler exploded in aten/src/ATen/native/Foo.cpp)"
    for name in (CPU_GENERIC, CUDA130, CPU_MKL):
        assert rows[name][0] == "ok" and rows[name][2] == "2"
        assert fs.marker(name).exists()
    assert rows[OSX][0].startswith("skipped (needs macOS")
    assert not fs.marker(CUDA129).exists()
    assert [run["config"] for run in fs.runs()] == LINUX
    # one log per config with that config's own output, also shown on the terminal
    failed_log = (fs.artifacts / f"{CUDA129}-log.txt").read_text()
    assert "compiler exploded" in failed_log and "failed (exit 7: error: compiler exploded in aten/src/ATen/native/Foo.cpp)" in failed_log
    assert f"[2/5 {CUDA129}] step: build recipe" in failed_log
    ok_log = (fs.artifacts / f"{CPU_MKL}-log.txt").read_text()
    assert f"running {CPU_MKL} in {CPU_IMAGE}" in ok_log and "compiler exploded" not in ok_log
    assert "compiler exploded" in proc.stdout
    assert f"log of failed {CUDA129}: {fs.artifacts / (CUDA129 + '-log.txt')}" in proc.stdout
    # progress: which config, which step, elapsed time
    assert f"[3/5 {CUDA130}] step: index build_artifacts (0:00:0" in proc.stdout


def test_markers_skip_finished_configs_and_force_rebuilds(fs):
    fs.artifacts.mkdir()
    fs.marker(CPU_MKL).write_text("")
    proc = fs.run("--all", "--filter", "None", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    assert [run["config"] for run in fs.runs()] == [CPU_GENERIC]
    assert summary_rows(proc.stdout)[CPU_MKL][0] == "skipped (done)"
    assert "--force rebuilds" in proc.stdout

    fs.log.unlink()
    proc = fs.run("--all", "--filter", "None", "--min-free-gb", "0")
    assert proc.returncode == 0 and fs.runs() == []   # both done: nothing to run, no preflight
    assert "2 skipped" in proc.stdout

    proc = fs.run(CPU_MKL, "--force", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    assert [run["config"] for run in fs.runs()] == [CPU_MKL]


def test_no_keep_going_stops_after_first_failure(fs):
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{CPU_GENERIC: "fail"}))
    proc = fs.run("--all", "--filter", "linux", "--no-keep-going", "--min-free-gb", "0", env=env)
    assert proc.returncode == 1
    rows = summary_rows(proc.stdout)
    assert rows[CPU_GENERIC][0] == "failed (exit 7: error: compiler exploded in aten/src/ATen/native/Foo.cpp)"
    assert all(rows[name][0] == "not started" for name in (CUDA129, CUDA130, CPU_MKL))
    assert len(fs.runs()) == 1


def test_exit_zero_without_marker_is_a_failure(fs):
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{"*": "nomarker"}))
    proc = fs.run(CPU_MKL, "--min-free-gb", "0", env=env)
    assert proc.returncode == 1
    assert "failed (build ended without writing its done-marker)" in proc.stdout


def test_prune_only_between_configs_and_only_when_asked(fs):
    fs.artifacts.mkdir()
    fs.marker(CUDA130).write_text("")   # a skipped config does not cause a prune
    proc = fs.run("--all", "--filter", "linux", "--prune", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    sequence = [call["argv"][0] if call["argv"][0] != "system" else "prune" for call in fs.calls()
                if call["argv"][0] in ("run", "system")]
    assert sequence == ["run", "prune", "run", "prune", "run"]
    prune = next(call["argv"] for call in fs.calls() if call["argv"][0] == "system")
    assert prune[:3] == ["system", "prune", "--force"]

    fs.log.unlink()
    proc = fs.run("--all", "--filter", "linux", "--force", "--min-free-gb", "0")
    assert proc.returncode == 0
    assert not any(call["argv"][0] == "system" for call in fs.calls())


def test_zip_logs(fs):
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{CUDA129: "fail"}))
    proc = fs.run("--all", "--filter", "mkl", "--zip-logs", "--min-free-gb", "0", env=env)
    assert proc.returncode == 1
    archives = list(fs.artifacts.glob("build-logs-*.zip"))
    assert len(archives) == 1 and f"logs zipped: {archives[0]}" in proc.stdout
    with zipfile.ZipFile(archives[0]) as archive:
        names = sorted(archive.namelist())
        assert names == sorted([f"{CUDA129}-log.txt", f"{CUDA130}-log.txt", f"{CPU_MKL}-log.txt",
                                "summary.txt"])
        assert "compiler exploded" in archive.read(f"{CUDA129}-log.txt").decode()
        assert "failed (exit 7: error: compiler exploded in aten/src/ATen/native/Foo.cpp)" in archive.read("summary.txt").decode()
    assert not list(fs.artifacts.glob(".build-logs-*"))  # no temp file left


def test_previous_log_is_kept(fs):
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{"*": "fail"}))
    fs.run(CPU_MKL, "--min-free-gb", "0", env=env)
    proc = fs.run(CPU_MKL, "--min-free-gb", "0")
    assert proc.returncode == 0
    assert "compiler exploded" in (fs.artifacts / f"{CPU_MKL}-log.previous.txt").read_text()
    assert "compiler exploded" not in (fs.artifacts / f"{CPU_MKL}-log.txt").read_text()


def test_container_environment_tokens_and_user(fs):
    env = fs.env(**TOKENS, CPU_COUNT="1", CI="azure", FAKE_DOCKER_RECORD_ENV=",".join(TOKENS),
                 CONDA_FORGE_DOCKER_RUN_ARGS="--shm-size 2g -e EXTRA_FROM_ARGS=1")
    proc = fs.run(CUDA129, "--min-free-gb", "0", env=env)
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    inside = run["container_env"]
    assert inside["CONFIG"] == CUDA129
    assert inside["HOST_USER_ID"] == str(os.getuid())
    assert inside["CPU_COUNT"] == "1" and inside["CI"] == "azure"
    assert inside["UPLOAD_PACKAGES"] == "False"
    assert inside["CONFIG_FILE"] == f"/home/conda/feedstock_root/.ci_support/{CUDA129}.yaml"
    assert inside["EXTRA_FROM_ARGS"] == "1" and "--shm-size" in run["argv"]
    assert run["image"] == CUDA_IMAGE
    assert run["command"] == ["bash", "/home/conda/feedstock_root/localbuild/in_container/build_steps.sh"]
    assert "--privileged" not in run["argv"] and "--gpus" not in run["argv"]
    assert not any(name in inside for name in TOKENS)
    text = json.dumps(fs.calls())
    assert not any(secret in text for secret in TOKENS.values())   # not in argv, not in env
    assert run["client_env"] == {}       # not even the engine client process sees them
    assert "FEEDSTOCK_DEV_TAG" not in inside


def test_upload_passes_tokens_by_name_only(fs):
    env = fs.env(**TOKENS)
    proc = fs.run(CPU_MKL, "--upload", "--min-free-gb", "0", env=env)
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    assert run["container_env"]["BINSTAR_TOKEN"] == TOKENS["BINSTAR_TOKEN"]
    assert run["container_env"]["ANACONDA_API_TOKEN"] == TOKENS["ANACONDA_API_TOKEN"]
    assert run["container_env"]["UPLOAD_PACKAGES"] == "True"
    assert "FEEDSTOCK_TOKEN" not in run["container_env"] and "GITHUB_TOKEN" not in run["container_env"]
    assert not any(secret in " ".join(run["argv"]) for secret in TOKENS.values())
    assert not any(secret in proc.stdout for secret in TOKENS.values())


def test_remote_compile_cache_url_by_value_password_by_name(fs):
    password = "s3cret-cache-pw"
    env = fs.env(FEEDSTOCK_COMPILE_CACHE_PASSWORD=password, **TOKENS)
    proc = fs.run(CPU_MKL, "--compile-cache", "redis://cache.example.org:6379",
                  "--compile-cache-read-only", "--min-free-gb", "0", env=env)
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    inside = run["container_env"]
    assert inside["FEEDSTOCK_COMPILE_CACHE"] == "redis://cache.example.org:6379"
    assert inside["FEEDSTOCK_COMPILE_CACHE_READ_ONLY"] == "1"
    assert inside["FEEDSTOCK_COMPILE_CACHE_PASSWORD"] == password        # reached the build
    assert "-e" in run["argv"] and "FEEDSTOCK_COMPILE_CACHE_PASSWORD" in run["argv"]  # by name
    assert password not in json.dumps(run["argv"]) and password not in proc.stdout
    assert not any(name in inside for name in TOKENS)                    # no upload: no tokens
    assert option_values(run["argv"], "-v") == [                         # a URL mounts nothing
        f"{fs.root}:/home/conda/feedstock_root:rw,z",
        f"{fs.root / 'recipe'}:/home/conda/recipe_root:rw,z"]


def test_cache_password_stays_home_without_a_cache(fs):
    env = fs.env(FEEDSTOCK_COMPILE_CACHE_PASSWORD="pw-unused")
    proc = fs.run(CPU_MKL, "--min-free-gb", "0", env=env)
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    assert "FEEDSTOCK_COMPILE_CACHE_PASSWORD" not in run["container_env"]
    assert "FEEDSTOCK_COMPILE_CACHE" not in run["container_env"]


@pytest.mark.parametrize("args, message", [
    (["--compile-cache", "redis://user:pw@host:6379"], "set FEEDSTOCK_COMPILE_CACHE_PASSWORD"),
    (["--compile-cache", "s3://bucket/cache"], "use redis://host:port, http://host/path or a folder"),
    (["--compile-cache", "/tmp/a", "--ccache", "/tmp/b"], "older spelling of --compile-cache"),
    (["--compile-cache-read-only"], "needs --compile-cache"),
])
def test_bad_compile_cache_arguments(fs, args, message):
    proc = fs.run(CPU_MKL, *args, "--min-free-gb", "0")
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert fs.runs() == []


@pytest.mark.parametrize("how", ["env", "flag"])
def test_podman(fs, how):
    if how == "env":
        proc = fs.run(CUDA129, "--gpu-tests", "--min-free-gb", "0",
                      env=fs.env(DOCKER_EXECUTABLE="podman"))
    else:
        proc = fs.run(CUDA129, "--gpu-tests", "--engine", "podman", "--min-free-gb", "0",
                      env=fs.env(DOCKER_EXECUTABLE="docker"))
    assert proc.returncode == 0, proc.stderr
    assert {call["exe"] for call in fs.calls()} == {"podman"}
    (run,) = fs.runs()
    assert option_values(run["argv"], "--device") == ["nvidia.com/gpu=all"]
    assert all(v.endswith(":rw,z") for v in option_values(run["argv"], "-v"))


def test_mounts_ccache_and_gpus(fs, tmp_path):
    cache = tmp_path / "ccache-dir"
    proc = fs.run(CUDA129, CPU_MKL, "--gpu-tests", "--ccache", str(cache), "--jobs", "3",
                  "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    cuda_run, cpu_run = sorted(fs.runs(), key=lambda r: r["config"] != CUDA129)
    assert option_values(cuda_run["argv"], "-v") == [
        f"{fs.root}:/home/conda/feedstock_root:rw,z",
        f"{fs.root / 'recipe'}:/home/conda/recipe_root:rw,z",
        f"{cache}:/home/conda/compile-cache:rw,z"]
    assert cache.is_dir()
    assert option_values(cuda_run["argv"], "--gpus") == ["all"]
    assert "--gpus" not in cpu_run["argv"]                 # CPU config: no GPU asked for
    for run in (cuda_run, cpu_run):
        # --ccache DIR is the older spelling of --compile-cache DIR: one mechanism
        assert run["container_env"]["FEEDSTOCK_COMPILE_CACHE"] == "/home/conda/compile-cache"
        assert "CCACHE_DIR" not in run["container_env"]
        assert run["container_env"]["FEEDSTOCK_MAX_JOBS"] == "3"
        assert "FEEDSTOCK_DEV_TAG" not in run["container_env"]   # speed-only flags: release build


def test_rocm_gpu_devices(tmp_path):
    fs = make_feedstock(tmp_path, configs={"linux_64_rocm6.4": dict(rocm="6.4", blas="generic")})
    proc = fs.run("linux_64_rocm6.4", "--gpu-tests", "--rocm-arch", "gfx90a", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    assert option_values(run["argv"], "--device") == ["/dev/kfd", "/dev/dri"]
    assert run["container_env"]["FEEDSTOCK_ROCM_ARCH"] == "gfx90a"
    assert run["container_env"]["FEEDSTOCK_DEV_TAG"] == "gfx90a"


def test_python_subset_is_a_dev_build_with_derived_config(fs):
    original = (fs.root / ".ci_support" / f"{CUDA129}.yaml").read_text()
    proc = fs.run(CUDA129, "--python", "3.12,3.13", "--cuda-arch", "9.0;10.0+PTX",
                  "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    inside = run["container_env"]
    tag = "py312py313sm9010.0ptx".replace(".", "")
    assert inside["FEEDSTOCK_DEV_TAG"] == tag
    assert inside["FEEDSTOCK_CUDA_ARCH_LIST"] == "9.0;10.0+PTX"
    derived = fs.artifacts / "localbuild" / f"{CUDA129}-dev{tag}.yaml"
    assert inside["CONFIG_FILE"] == f"/home/conda/feedstock_root/build_artifacts/localbuild/{derived.name}"
    data = yaml.safe_load(derived.read_text())
    assert data["python"] == ["3.12.* *_cpython", "3.13.* *_cpython"]
    assert data["is_python_min"] == ["false", "false"]
    assert (fs.root / ".ci_support" / f"{CUDA129}.yaml").read_text() == original
    # the dev build has its own marker and log, so a release batch still builds the config
    assert (fs.artifacts / f"conda-forge-build-done-{CUDA129}-dev{tag}").exists()
    assert not fs.marker(CUDA129).exists()
    assert (fs.artifacts / f"{CUDA129}-dev{tag}-log.txt").exists()
    fs.log.unlink()
    proc = fs.run(CUDA129, "--min-free-gb", "0")
    assert proc.returncode == 0 and [r["config"] for r in fs.runs()] == [CUDA129]


def test_debug_and_output_id(fs):
    proc = fs.run(CPU_MKL, "--debug", "--output-id", "pytorch-*-py312*", "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stderr
    (run,) = fs.runs()
    assert run["container_env"]["BUILD_WITH_CONDA_DEBUG"] == "1"
    assert run["container_env"]["BUILD_OUTPUT_ID"] == "pytorch-*-py312*"
    assert "-i" in run["argv"]            # stdin is not a terminal here, so no -t


def test_sigint_during_batch(fs, tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while the first config
    builds: no marker for it, the rest not started, summary printed, exit 130."""
    ready = tmp_path / "ready"
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{CPU_GENERIC: "sleep"}), FAKE_DOCKER_READY=str(ready))
    proc = subprocess.Popen([sys.executable, "-S", str(fs.root / "build-locally.py"), "--all",
                             "--filter", "None", "--min-free-gb", "0"],
                            cwd=fs.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ready.exists(), proc.communicate()
    fake_pid = int(ready.read_text())
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - started < 20
    assert proc.returncode == 130, stderr
    rows = summary_rows(stdout)
    assert rows[CPU_GENERIC][0] == "interrupted (Ctrl-C)"
    assert rows[CPU_MKL][0] == "not started"
    assert not fs.marker(CPU_GENERIC).exists() and not fs.marker(CPU_MKL).exists()
    assert "no done-marker written" in (fs.artifacts / f"{CPU_GENERIC}-log.txt").read_text()
    assert len(fs.runs()) == 1
    assert any(call["argv"][:2] == ["rm", "-f"] for call in fs.calls())   # container removed
    with pytest.raises(ProcessLookupError):
        os.kill(fake_pid, 0)       # the engine client is gone too


def test_sigterm_to_build_locally_alone_stops_the_build(fs, tmp_path):
    """A scheduler's SIGTERM reaches only build-locally (the build runs in its own session)."""
    ready = tmp_path / "ready"
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{"*": "sleep"}), FAKE_DOCKER_READY=str(ready))
    proc = subprocess.Popen([sys.executable, "-S", str(fs.root / "build-locally.py"), CPU_MKL,
                             "--min-free-gb", "0"], cwd=fs.root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ready.exists(), proc.communicate()
    fake_pid = int(ready.read_text())
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert summary_rows(stdout)[CPU_MKL][0] == "interrupted (SIGTERM)"
    assert not fs.marker(CPU_MKL).exists()
    with pytest.raises(ProcessLookupError):
        os.kill(fake_pid, 0)


def test_background_process_holding_the_output_does_not_hang(fs, tmp_path):
    pid_file = tmp_path / "daemon.pid"
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{"*": "daemon"}), FAKE_DOCKER_READY=str(pid_file))
    started = time.monotonic()
    try:
        proc = fs.run(CPU_MKL, "--min-free-gb", "0", env=env, timeout=40)
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == 0, proc.stdout
    assert time.monotonic() - started < 30          # not the daemon's 60 s
    assert summary_rows(proc.stdout)[CPU_MKL][0] == "ok"


def test_build_artifacts_that_is_a_file_stops_the_run_in_one_line(fs):
    # the lock file goes into build_artifacts/ before anything runs
    fs.artifacts.write_text("not a directory")
    proc = fs.run(CPU_MKL, "--min-free-gb", "0")
    assert proc.returncode == 3
    assert proc.stderr == f"error: {fs.artifacts} is not a folder; move it away (build-locally keeps " \
                          "packages, done-markers and logs in that folder)\n"
    assert fs.runs() == [] and fs.artifacts.read_text() == "not a directory"


def test_marker_that_cannot_be_removed_fails_the_config_in_one_line(fs):
    # the lock is taken, but the config's old done-marker cannot be removed (here: a folder)
    fs.marker(CPU_MKL).mkdir(parents=True)
    (fs.marker(CPU_MKL) / "keep").write_text("")
    proc = fs.run(CPU_MKL, "--force", "--min-free-gb", "0")
    assert proc.returncode == 1
    assert "failed: cannot write" in proc.stdout and fs.runs() == []
    assert "Traceback" not in proc.stderr


def test_container_runs_the_real_build_steps(fs, tmp_path):
    """Only the engine is fake: its `run` executes the container's command on this host with
    the mounts mapped, so build-locally.py -> `docker run` -> localbuild/in_container/build_steps.sh -> conda
    (tests/support/fake_docker/fake_conda.py) runs for real, environment and paths included."""
    install_fake_conda(fs.bin_dir)
    conda_log = tmp_path / "conda-calls.jsonl"
    cache = tmp_path / "ccache-dir"
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{"*": "exec"}), FAKE_CONDA_LOG=str(conda_log),
                 FAKE_CONDA_BUILD_FAIL=CUDA129)
    proc = fs.run(CUDA129, CPU_MKL, "--python", "3.12", "--ccache", str(cache), "--jobs", "2",
                  "--min-free-gb", "0", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = summary_rows(proc.stdout)
    assert rows[CUDA129][0] == "failed (exit 1)" and rows[CPU_MKL][0] == "ok"
    assert rows[CPU_MKL][2] == "2"
    assert "compilation failed" in (fs.artifacts / f"{CUDA129}-devpy312-log.txt").read_text()
    assert not (fs.artifacts / f"conda-forge-build-done-{CUDA129}-devpy312").exists()
    assert (fs.artifacts / f"conda-forge-build-done-{CPU_MKL}-devpy312").exists()
    assert f"[2/2 {CPU_MKL}] step: index build_artifacts" in proc.stdout

    calls = read_jsonl(conda_log)
    by_config = {}
    for call in calls:
        by_config.setdefault(call["env"]["CONFIG"], []).append(call)
    assert [c["argv"][0] for c in by_config[CUDA129]] == ["install", "build"]   # stopped there
    assert [c["argv"][0] for c in by_config[CPU_MKL]] == ["install", "build", "index", "index"]
    build = by_config[CPU_MKL][1]
    derived = fs.artifacts / "localbuild" / f"{CPU_MKL}-devpy312.yaml"
    assert build["argv"][:4] == ["build", str(fs.root / "recipe"), "-m", str(derived)]
    assert build["config_python"] == ["3.12.* *_cpython"]        # the derived config was read
    assert build["env"]["FEEDSTOCK_COMPILE_CACHE"] == str(cache)  # the mounted cache folder
    assert build["env"]["FEEDSTOCK_MAX_JOBS"] == "2"
    assert build["env"]["FEEDSTOCK_DEV_TAG"] == "py312"
    assert build["env"]["CONDA_PKGS_DIRS"] == f"{fs.artifacts}/pkg_cache"
    assert not any(c["marker_exists"] for c in calls)
    assert (fs.artifacts / "linux-64" / "repodata.json").is_file()


def test_zip_logs_that_cannot_be_written_is_a_warning(tmp_path):
    """The builds are over when the logs are zipped: a failure there is one warning line,
    no traceback and no temporary file."""
    import io

    from localbuild.batch import _zip_logs
    from localbuild.console import Console
    from localbuild.options import Options

    root = tmp_path / "feedstock"
    root.mkdir()
    (root / "build_artifacts").write_text("a file where the folder goes")
    out = io.BytesIO()
    _zip_logs([], Options(feedstock_root=root, stamp="s"), "summary\n",
              Console(out))
    text = out.getvalue().decode()
    assert text.startswith("build-locally: warning: could not zip the logs into "
                           f"{root / 'build_artifacts' / 'build-logs-s.zip'}")
    assert text.count("\n") == 1
    assert sorted(p.name for p in root.iterdir()) == ["build_artifacts"]


def test_test_only_tests_built_packages_without_building(fs, tmp_path):
    """--test-only (the CI GPU test job): the real build_steps.sh tests what a build left in
    build_artifacts/, compiles nothing, writes no marker, and needs the packages to be there."""
    install_fake_conda(fs.bin_dir)
    conda_log = tmp_path / "conda-calls.jsonl"
    env = fs.env(FAKE_DOCKER_PLAN=plan(**{"*": "exec"}), FAKE_CONDA_LOG=str(conda_log))
    missing = fs.run(CUDA129, "--test-only", "--gpu-tests", "--min-free-gb", "0", env=env)
    assert missing.returncode == 1
    assert "no package of" in (fs.artifacts / f"{CUDA129}-log.txt").read_text()
    assert fs.run(CUDA129, "--min-free-gb", "0", env=env).returncode == 0     # the build job
    conda_log.unlink()
    fs.marker(CUDA129).unlink()       # the CI test job gets packages, never the build's marker
    proc = fs.run(CUDA129, "--test-only", "--gpu-tests", "--min-free-gb", "0", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [c["argv"] for c in read_jsonl(conda_log)]
    assert [c[0] for c in calls] == ["install", "build", "index", "index", "build", "build"]
    assert "--output" in calls[1]
    tested = [c[c.index("--test") + 1] for c in calls[4:]]
    assert [Path(t).name for t in tested] == list(fake_conda_packages(CUDA129))
    assert not fs.marker(CUDA129).exists()
    run = fs.runs()[-1]
    assert run["container_env"]["TEST_ONLY"] == "1"
    assert option_values(run["argv"], "--gpus") == ["all"]
    bad = fs.run(CUDA129, "--test-only", "--debug", env=env)
    assert bad.returncode == 2 and "does not combine" in bad.stderr
