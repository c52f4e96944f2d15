"""devtools/podman_config.py on this machine, with real podman: the storage driver it writes is
overlay where the folder's filesystem takes it, and a container runs on that store without
podman's 20 s wait at exit (which a long run folder path causes); on an overlayfs folder (as
inside many containers) it is vfs with one line saying why; a vfs store already there keeps
vfs, which podman still opens."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.container_host import host_shell_rootfs, overlay_mounts_in
from tests.support.paths import REPO_ROOT

pytestmark = [pytest.mark.container]

SCRIPT = REPO_ROOT / "devtools" / "podman_config.py"
IMAGE = "localhost/feedstock-test-shell:1"
# podman waits 20 s for conmon at a container's exit when the run folder path is too long (and
# with --log-level debug, so no debug here); a container that takes that long is that wait
CONMON_WAIT_S = 15


@pytest.fixture(autouse=True)
def rootful_podman():
    missing = [tool for tool in ("podman", "runc") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install podman runc; .ci/run does)")
    if os.geteuid() != 0:
        pytest.skip("the podman tests run rootful podman (CI runs as root)")


def configure(folder: Path) -> tuple[dict[str, str], str]:
    """Run the script as the docs do; (environment with its exports, its stderr)."""
    proc = subprocess.run([sys.executable, str(SCRIPT), str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    env = dict(os.environ)
    for line in proc.stdout.splitlines():
        name, value = shlex.split(line.removeprefix("export "))[0].split("=", 1)
        env[name] = value
    assert set(env) >= {"CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF"}, proc.stdout
    return env, proc.stderr


def written_driver(env: dict[str, str]) -> str:
    match = re.search(r'^driver = "(\w+)"$', Path(env["CONTAINERS_STORAGE_CONF"]).read_text(),
                      re.MULTILINE)
    assert match, "storage.conf names no driver"
    return match.group(1)


def podman(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(["podman", *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"podman {' '.join(args)}: {proc.stderr[-800:]}"
    return proc


def reported_driver(env: dict[str, str]) -> str:
    return podman(env, "info", "--format", "{{.Store.GraphDriverName}}").stdout.strip()


def storage_setting(env: dict[str, str], key: str) -> str:
    match = re.search(rf'^{key} = "([^"]+)"$', Path(env["CONTAINERS_STORAGE_CONF"]).read_text(),
                      re.MULTILINE)
    assert match, f"storage.conf has no {key}"
    return match.group(1)


def remove_runroot(path: Path) -> None:
    """The run folder the script put under /tmp for `path` (too long a path for podman)."""
    if path.joinpath("storage.conf").is_file():
        runroot = Path(storage_setting({"CONTAINERS_STORAGE_CONF": str(path / "storage.conf")},
                                       "runroot"))
        if not runroot.is_relative_to(path):
            shutil.rmtree(runroot, ignore_errors=True)


@pytest.fixture
def folder(tmp_path):
    """tmp_path/podman, whose run folder path is longer than podman tolerates."""
    path = tmp_path / "podman"
    yield path
    remove_runroot(path)


def test_overlay_where_the_folder_takes_it_and_a_container_runs_on_it(tmp_path, folder):
    expected = "overlay" if overlay_mounts_in(tmp_path) else "vfs"
    env, stderr = configure(folder)
    assert written_driver(env) == reported_driver(env) == expected
    if expected == "overlay":
        assert stderr == ""
    else:
        assert len(stderr.splitlines()) == 1 and "using vfs" in stderr, stderr
    assert len(str(folder / "run")) > 50, "the case this test is for: a long run folder path"
    assert len(storage_setting(env, "runroot")) <= 50
    podman(env, "import", str(host_shell_rootfs(tmp_path / "shell.tar")), IMAGE)
    started = time.monotonic()
    run = podman(env, "run", "--rm", "--network", "none", IMAGE, "/bin/sh", "-c", "echo hi")
    seconds = time.monotonic() - started
    print(f"{expected}: container start and exit {seconds:.2f} s")
    assert run.stdout == "hi\n"
    assert seconds < CONMON_WAIT_S, f"{seconds:.1f} s: podman waited for conmon at the exit"


def test_on_an_overlayfs_folder_it_falls_back_to_vfs_with_one_line(tmp_path):
    layers = [tmp_path / name for name in ("lower", "upper", "work", "merged")]
    for folder in layers:
        folder.mkdir()
    lower, upper, scratch, merged = layers
    mount = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                            f"lowerdir={lower},upperdir={upper},workdir={scratch}", str(merged)],
                           capture_output=True, text=True, timeout=30)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount an overlay here: {mount.stderr.strip()}")
    try:
        env, stderr = configure(merged / "podman")
        assert written_driver(env) == reported_driver(env) == "vfs"
        [line] = stderr.splitlines()
        assert line.startswith("podman_config: overlay does not work in ") and "overlayfs" in line
        assert line.endswith("; using vfs"), line
    finally:
        remove_runroot(merged / "podman")
        subprocess.run(["umount", "-l", str(merged)], capture_output=True, timeout=30)


def test_a_vfs_store_already_there_keeps_vfs(tmp_path, folder):
    """podman refuses to open a store with another driver than the one that made it."""
    (folder / "storage").mkdir(parents=True)
    made_with_vfs = folder / "vfs.conf"
    made_with_vfs.write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{folder / "storage"}"\n'
                             f'runroot = "{folder / "run"}"\n')
    assert reported_driver(dict(os.environ, CONTAINERS_STORAGE_CONF=str(made_with_vfs))) == "vfs"
    env, stderr = configure(folder)
    assert written_driver(env) == reported_driver(env) == "vfs"
    if overlay_mounts_in(tmp_path):
        assert stderr.startswith("podman_config: keeping vfs: ") and len(stderr.splitlines()) == 1
    else:
        assert stderr == ""


def test_resetting_one_store_leaves_another_stores_containers_and_networks(tmp_path):
    """Each store has its own podman tmp_dir and network folder: a reset of one (what a test once
    did) used to remove /run/libpod and /etc/containers/networks, which every store shared."""
    mine, theirs = tmp_path / "a", tmp_path / "b"
    try:
        env_a, _ = configure(mine)
        env_b, _ = configure(theirs)
        podman(env_a, "import", str(host_shell_rootfs(tmp_path / "shell.tar")), IMAGE)
        exited = subprocess.run(["podman", "run", "--name", "kept", "--network", "none", IMAGE, "/bin/sh", "-c",
                                 "exit 7"], env=env_a, capture_output=True, text=True, timeout=300)
        assert exited.returncode == 7, exited.stderr
        podman(env_a, "network", "create", "feedstock-kept-net")
        tmp_dir = Path(re.search(r'^tmp_dir = "([^"]+)"$', Path(env_a["CONTAINERS_CONF"]).read_text(),
                                 re.MULTILINE).group(1))
        assert (tmp_dir / "alive").is_file() and Path("/run/libpod") not in (tmp_dir, *tmp_dir.parents)
        podman(env_b, "system", "reset", "--force")
        assert (tmp_dir / "alive").is_file(), "the other store's reset removed this store's tmp_dir"
        state = podman(env_a, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", "kept").stdout.split()
        assert state == ["exited", "7"], state
        assert "feedstock-kept-net" in podman(env_a, "network", "ls", "--format", "{{.Name}}").stdout.split()
    finally:
        for store, env in ((mine, locals().get("env_a")), (theirs, locals().get("env_b"))):
            if env:
                subprocess.run(["podman", "system", "reset", "--force"], env=env, capture_output=True, timeout=300)
            remove_runroot(store)
