"""A stand-in for the `docker` / `podman` client in build-locally tests (no engine runs here).

Installed on PATH by tests/support/build_locally.py as `docker` and `podman` wrappers. It
appends one JSON record per call to $FAKE_DOCKER_LOG:
  {"exe": "docker", "argv": [...], "client_env": {...}, "container_env": {...}, "config": ...}
`container_env` is what a real engine would put into the container: every -e NAME=VALUE, and
-e NAME resolved from this process's environment.

Behaviour is chosen by environment variables:
  FAKE_DOCKER_PLAN='{"cfg": "fail", "*": "succeed"}'   what `run` does per CONFIG:
      succeed   print step lines, write two packages and the done-marker, exit 0
      fail      print an error, exit $FAKE_DOCKER_FAIL_CODE (default 7), no marker
      nomarker  exit 0 without writing the marker
      sleep     write $FAKE_DOCKER_READY, then sleep (for Ctrl-C tests); SIGTERM exits 143
                (with $FAKE_DOCKER_STOP_WHEN set: once that file exists, as a build that
                takes its time to stop)
      daemon    like succeed, but leaves a background process (pid in $FAKE_DOCKER_READY)
                holding stdout open, as a compiler server started by a build can
      exec      run the container's command for real on this host, as a bind mount would
                see it: container paths of the -v mounts in the command and the -e values
                become their host paths, and the environment is the -e values plus PATH,
                HOME and FAKE_CONDA_* (so localbuild/in_container/build_steps.sh runs with tests' fake conda)
  FAKE_DOCKER_RECORD_ENV=A,B   client environment variables to record (values)
  FAKE_DOCKER_PS=FILE          `ps` prints the container names listed in FILE (if it exists):
                               the running containers a killed run left behind
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

VALUE_OPTIONS = {"--name", "--label", "-v", "--volume", "-e", "--env", "--gpus", "--device",
                 "--group-add", "--shm-size", "--network", "--memory", "-m", "--cpus", "--user",
                 "-u", "--workdir", "-w", "--entrypoint", "--ulimit", "--filter"}
FEEDSTOCK_TARGET = "/home/conda/feedstock_root"



def write_ready(path: str, pid: int) -> None:
    """The pid, written whole (temp + rename): a test reads it as soon as the file exists."""
    Path(path + ".tmp").write_text(str(pid))
    os.replace(path + ".tmp", path)

def parse_run(args: list[str]) -> dict:
    options: list[tuple[str, str | None]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("-"):
            break
        if arg in VALUE_OPTIONS:
            options.append((arg, args[index + 1]))
            index += 2
        else:
            options.append((arg, None))
            index += 1
    image = args[index] if index < len(args) else None
    return {"options": options, "image": image, "command": args[index + 1:]}


def container_env(options: list[tuple[str, str | None]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for name, value in options:
        if name in ("-e", "--env") and value is not None:
            if "=" in value:
                key, _, val = value.partition("=")
                env[key] = val
            elif value in os.environ:
                env[value] = os.environ[value]
    return env


def feedstock_mount(options: list[tuple[str, str | None]]) -> Path | None:
    for name, value in options:
        if name in ("-v", "--volume") and value and f":{FEEDSTOCK_TARGET}:" in value + ":":
            return Path(value.split(f":{FEEDSTOCK_TARGET}")[0])
    return None


def mount_pairs(options: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """(container path, host path) of each -v mount, longest container path first."""
    pairs = []
    for name, value in options:
        if name in ("-v", "--volume") and value:
            host, target = value.split(":")[:2]
            pairs.append((target, host))
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def to_host(text: str, pairs: list[tuple[str, str]]) -> str:
    for target, host in pairs:
        if text == target or text.startswith(target + "/"):
            return host + text[len(target):]
    return text


def exec_command(parsed: dict, env: dict[str, str]) -> int:
    """Run the container's command on the host with the mounts mapped (see the `exec` action)."""
    import subprocess

    pairs = mount_pairs(parsed["options"])
    child_env = {k: v for k, v in os.environ.items()
                 if k in ("PATH", "HOME", "LANG") or k.startswith("FAKE_CONDA")}
    child_env.update({key: to_host(value, pairs) for key, value in env.items()})
    # build_steps.sh defaults these to the mount points, which exist only in a container
    child_env.setdefault("FEEDSTOCK_ROOT", to_host(FEEDSTOCK_TARGET, pairs))
    child_env.setdefault("RECIPE_ROOT", to_host("/home/conda/recipe_root", pairs))
    return subprocess.call([to_host(arg, pairs) for arg in parsed["command"]], env=child_env)


def stop_slowly() -> None:
    """SIGTERM: exit 143, once $FAKE_DOCKER_STOP_WHEN exists where it is set (60 s at most)."""
    when = os.environ.get("FAKE_DOCKER_STOP_WHEN")
    deadline = time.monotonic() + 60
    while when and not Path(when).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(143)


def record(entry: dict) -> None:
    log = os.environ.get("FAKE_DOCKER_LOG")
    if not log:
        return
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def do_run(parsed: dict, env: dict[str, str]) -> int:
    config = env.get("CONFIG", "")
    plan = json.loads(os.environ.get("FAKE_DOCKER_PLAN", "{}"))
    action = plan.get(config, plan.get("*", "succeed"))
    root = feedstock_mount(parsed["options"])
    print(f"fake engine: running {config} in {parsed['image']} ({action})", flush=True)
    if action == "exec":
        return exec_command(parsed, env)
    print("::build-locally-step:: configure conda", flush=True)
    if action == "fail":
        print("::build-locally-step:: build recipe", flush=True)
        print("error: compiler exploded in aten/src/ATen/native/Foo.cpp", flush=True)
        return int(os.environ.get("FAKE_DOCKER_FAIL_CODE", "7"))
    if action == "sleep":
        signal.signal(signal.SIGTERM, lambda *_: stop_slowly())
        print("::build-locally-step:: build recipe", flush=True)
        ready = os.environ.get("FAKE_DOCKER_READY")
        if ready:
            write_ready(ready, os.getpid())
        time.sleep(120)
        return 0
    if action == "daemon":
        import subprocess

        child = subprocess.Popen(["sleep", "60"], start_new_session=True)
        write_ready(os.environ["FAKE_DOCKER_READY"], child.pid)
        action = "succeed"
    if action in ("succeed", "nomarker"):
        assert root is not None, "no feedstock mount"
        artifacts = root / "build_artifacts"
        subdir = artifacts / "linux-64"
        subdir.mkdir(parents=True, exist_ok=True)
        print("::build-locally-step:: build recipe", flush=True)
        for package in (f"libtorch-2.13.0-{config}_0.conda", f"pytorch-2.13.0-{config}_0.conda"):
            (subdir / package).write_bytes(b"fake package for " + config.encode())
        print("::build-locally-step:: index build_artifacts", flush=True)
        if action == "succeed":
            marker = env.get("DONE_MARKER", f"conda-forge-build-done-{config}")
            (artifacts / marker).write_text("")
            print("::build-locally-step:: done", flush=True)
        return 0
    print(f"fake engine: unknown action {action!r}", file=sys.stderr)
    return 99


def main(argv: list[str]) -> int:
    exe = os.environ.get("FAKE_DOCKER_EXE") or Path(argv[0]).name
    args = argv[1:]
    recorded = [n for n in os.environ.get("FAKE_DOCKER_RECORD_ENV", "").split(",") if n]
    entry: dict = {"exe": exe, "argv": args,
                   "client_env": {n: os.environ[n] for n in recorded if n in os.environ}}
    command = args[0] if args else ""
    if command == "info":
        record(entry)
        print("Server Version: fake")
        return 0
    if command == "run":
        parsed = parse_run(args[1:])
        env = container_env(parsed["options"])
        entry.update({"container_env": env, "config": env.get("CONFIG"), "image": parsed["image"],
                      "command": parsed["command"]})
        record(entry)
        return do_run(parsed, env)
    record(entry)
    if command == "ps":
        listed = Path(os.environ.get("FAKE_DOCKER_PS", "/nonexistent"))
        if listed.is_file():
            print(listed.read_text(), end="")
        return 0
    if args[:2] == ["system", "prune"]:
        print("Total reclaimed space: 0B")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
