"""What build-locally must do in any real container engine, checked the same way in podman
(tests/localbuild/test_podman_build.py) and Docker (test_docker_build.py): a rig is the
module's fixture, with `engine` (run(), containers()), `env`, `root`, `artifacts`, `channel`,
`run(*args)` and `args(*configs)`."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from localbuild.engine import LABEL
from tests.support.paths import RECIPE_VERSION
from tests.support.podman import CPU, FAILING, FAILING_TOO, INTERRUPTED, NO_IMAGE
from tests.support.terminal import in_a_terminal, line_after

STRAY = "feedstock-test-stray"


def failed_configs_keep_their_containers_through_prune(rig, executable: str, image: str) -> None:
    """Two failing configs with --prune between them: a stray stopped container goes, both
    failed builds' containers and the build image stay; the enter and remove lines work."""
    rig.engine.run("create", "--name", STRAY, image, "true")
    proc = rig.run(*rig.args(FAILING, FAILING_TOO), "--prune")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert out.count(f"pruning between configs: {executable} system prune") == 1, out
    assert "pruned:" in out, out
    kept = rig.engine.containers(LABEL)
    assert len([name for name in kept if "failing" in name]) == 2, kept
    assert STRAY not in rig.engine.run("ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert rig.engine.run("image", "inspect", image, check=False).returncode == 0
    assert not (rig.artifacts / f"conda-forge-build-done-{FAILING}").exists()

    enter = line_after(out, "enter it:")
    assert enter.startswith(f"{executable} commit ") and " run -it --rm " in enter
    # inside: the failed config's own file, through the feedstock mount
    code, shown = in_a_terminal(enter, f"grep -c 3.99 /home/conda/feedstock_root/.ci_support/"
                                       f"{FAILING}.yaml | sed s/^/matches=/; exit 7\n", rig.env)
    assert code == 7 and "matches=1" in shown, shown[-2000:]
    remove = line_after(out, "remove it:")
    name = remove.split()[-1]
    assert subprocess.run(remove, shell=True, env=rig.env, capture_output=True).returncode == 0
    assert name not in rig.engine.containers(LABEL)
    rig.engine.run("rmi", f"{name}-debug", check=False)
    for other in rig.engine.containers(LABEL):
        rig.engine.run("rm", "-f", other, check=False)


def sigint_removes_the_running_container(rig) -> None:
    """Ctrl-C while rattler-build works in the container: exit 130, the container gone, no
    done-marker."""
    log = rig.artifacts / f"{INTERRUPTED}-log.txt"
    proc = subprocess.Popen([sys.executable, str(rig.root / "build-locally.py"), *rig.args(INTERRUPTED)],
                            cwd=rig.root, env=rig.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if log.exists() and "::build-locally-step:: build recipe" in log.read_text(errors="replace"):
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.5)
    assert rig.engine.containers(f"{LABEL}={INTERRUPTED}"), "the build's container is not running"
    time.sleep(3)  # rattler-build is at work inside
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out
    assert "interrupted" in out and "no done-marker written" in out, out
    assert rig.engine.containers(f"{LABEL}={INTERRUPTED}") == []
    assert not (rig.artifacts / f"conda-forge-build-done-{INTERRUPTED}").exists()


def the_build_landed_for_the_user(rig, executable: str, owner: int, besides: str | None = None) -> None:
    """The cpu config's packages, index, done-marker and log in build_artifacts/, built with
    the --channel copy of the config, every file owned by `owner` (the SUDO_UID of a root run),
    but for those under build_artifacts/`besides` (see not_owned_by)."""
    names = sorted(p.name for p in (rig.artifacts / "linux-64").glob("*.conda"))
    assert any(n.startswith(f"libtorch-{RECIPE_VERSION}-cpu_generic_h") for n in names), names
    assert any(n.startswith(f"pytorch-{RECIPE_VERSION}-cpu_generic_py312_h") for n in names), names
    assert any(n.startswith(f"pytorch-cpu-{RECIPE_VERSION}-") for n in names), names
    assert (rig.artifacts / "linux-64" / "repodata.json").is_file()
    assert (rig.artifacts / f"conda-forge-build-done-{CPU}").is_file()
    log = (rig.artifacts / f"{CPU}-log.txt").read_text()
    assert "::build-locally-step:: build recipe" in log and f"command: {executable} run " in log
    # --channel replaced channel_sources in the derived config the container built with
    derived = yaml.safe_load((rig.artifacts / "localbuild" / f"{CPU}.yaml").read_text())
    assert derived["channel_sources"] == [str(rig.channel)]
    # the engine ran the build as root: what it wrote through the bind mount is handed back
    not_theirs = not_owned_by(rig.artifacts, owner, besides)
    assert not not_theirs, not_theirs[:10]


def not_owned_by(artifacts: Path, owner: int, besides: str | None = None) -> list[str]:
    """The paths in build_artifacts/ that `owner` does not own, but for build_artifacts/besides
    (a build whose engine died: its container wrote on after build-locally handed back)."""
    skip = artifacts / besides if besides else None
    return [str(p) for p in [artifacts, *artifacts.rglob("*")]
            if p.lstat().st_uid != owner and not (skip and (p == skip or skip in p.parents))]


def a_missing_image_is_one_line(rig) -> None:
    """A config whose image is not here and cannot be pulled: one line saying how to get or
    build it, exit 3, no log."""
    proc = rig.run(*rig.args(NO_IMAGE))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: image localhost/feedstock-not-here:1 "), lines
    assert f"devtools/stand_in_image.py {NO_IMAGE}" in lines[0]
    assert not (rig.artifacts / f"{NO_IMAGE}-log.txt").exists()


def _running(rig, config: str) -> list[str]:
    """The running containers of a config (`ps` without -a)."""
    out = rig.engine.run("ps", "--filter", f"label={LABEL}={config}", "--format", "{{.Names}}").stdout
    return sorted(out.split())


def _start_interrupted_build(rig) -> tuple[subprocess.Popen, list[str]]:
    """build-locally on the INTERRUPTED config, once its container runs (its build at work)."""
    proc = subprocess.Popen([sys.executable, str(rig.root / "build-locally.py"), *rig.args(INTERRUPTED)],
                            cwd=rig.root, env=rig.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while not (names := _running(rig, INTERRUPTED)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    return proc, names


def a_killed_or_hung_up_run_leaves_no_container(rig, how: str) -> float:
    """kill -9 or SIGHUP of build-locally while its container builds: within 10 s the container
    is gone (the build's guard removed it), no marker; SIGHUP exits 129 like Ctrl-C. Returns
    the seconds it took."""
    proc, names = _start_interrupted_build(rig)
    started = time.monotonic()
    proc.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGHUP)
    out, err = proc.communicate(timeout=120)
    if how == "SIGHUP":
        assert proc.returncode == 129, out + err
        assert "interrupted (SIGHUP) after " in out and "no done-marker written" in out, out[-2000:]
    while rig.engine.containers(f"{LABEL}={INTERRUPTED}"):
        assert time.monotonic() - started < 10, f"{names} still there 10 s after {how}"
        time.sleep(0.2)
    assert not (rig.artifacts / f"conda-forge-build-done-{INTERRUPTED}").exists()
    return time.monotonic() - started


def a_container_left_running_holds_the_folder(rig) -> None:
    """build-locally and its build's guard both killed (-9): the engine client's container
    runs on. The next run finds it by its build_artifacts/ label: --no-wait exits 4 naming it,
    `rm -f` and --no-wait; the named `rm -f` frees the folder."""
    import json

    proc, (name,) = _start_interrupted_build(rig)
    note = json.loads((rig.artifacts / ".build-locally.lock").read_text())
    os.kill(proc.pid, signal.SIGSTOP)        # it must not see its guard die first
    os.kill(note["build"]["pid"], signal.SIGKILL)
    proc.kill()
    proc.communicate(timeout=60)
    try:
        assert _running(rig, INTERRUPTED) == [name]
        refused = rig.run(*rig.args(CPU), "--force", "--no-wait")
        assert refused.returncode == 4, refused.stdout + refused.stderr
        line = refused.stderr.strip()
        assert line.startswith(f"error: build_artifacts/ is still being built into by container {name}, "
                               "left running by a build-locally run that was killed; wait for it to end "
                               "(run without --no-wait to queue behind it) or stop it: "), line
        stop = line.rsplit("stop it: ", 1)[1]
        assert stop == f"podman rm -f {name}" and len(refused.stderr.splitlines()) == 1
        assert "start:" not in refused.stdout
        assert subprocess.run(stop, shell=True, env=rig.env, capture_output=True, timeout=120).returncode == 0
        assert _running(rig, INTERRUPTED) == []
    finally:
        rig.engine.run("rm", "-f", name, check=False)
