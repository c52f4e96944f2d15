"""A real one-node Slurm 22.05 (Debian's slurmctld, slurmd, slurm-client) for the job-array tests
and benchmark: no systemd, munge, cgroups or accounting, private ports, every state folder under
one work folder, clients pointed at it by SLURM_CONF. Stopped afterwards (jobs cancelled,
`scontrol shutdown`, both daemons waited for), every wait bounded.

The spool folder is a short one of its own under /tmp (removed at the stop): slurmstepd makes
each job step's Unix socket there, and a socket path has at most 108 bytes. Under a deep test
folder a job never starts (`Unix socket path ... is too long (132 > 108)` in slurmd's log, the
tasks PENDING until the test gives up).
"""
from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tests.support.redis_server import free_port

TOOLS = ("slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
PARTITION = "debug"


class SlurmUnavailable(Exception):
    """The Slurm packages are missing or the daemons did not start; tests skip with this."""


@dataclass
class SlurmCluster:
    conf: Path              # slurm.conf; SLURM_CONF in env
    env: dict[str, str]     # this process's environment plus SLURM_CONF
    work: Path
    partition: str = PARTITION

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout)


def slurm_unavailable() -> str | None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return (f"{', '.join(missing)} not installed (apt-get install slurmctld slurmd "
                "slurm-client; .ci/run does)")
    return None


def node_memory_mb() -> int:
    """RealMemory as slurmd measures it (`slurmd -C`); a node configured above it is drained."""
    proc = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30)
    match = re.search(r"RealMemory=(\d+)", proc.stdout)
    return int(match.group(1)) if match else 1024


def config_text(work: Path, user: str, cpus: int, memory_mb: int, spool: Path | None = None) -> str:
    ctld, slurmd = free_port(), free_port()
    return "\n".join([
        "ClusterName=feedstock-test",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld}", f"SlurmdPort={slurmd}",
        f"SlurmUser={user}", f"SlurmdUser={user}",
        "AuthType=auth/none", "CredType=cred/none",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/filetxt", f"JobCompLoc={work / 'jobcomp.txt'}",
        f"StateSaveLocation={work / 'state'}", f"SlurmdSpoolDir={spool or work / 'spool'}",
        f"SlurmctldPidFile={work / 'slurmctld.pid'}", f"SlurmdPidFile={work / 'slurmd.pid'}",
        f"SlurmctldLogFile={work / 'slurmctld.log'}", f"SlurmdLogFile={work / 'slurmd.log'}",
        "ReturnToService=2", "MpiDefault=none",
        # without these, pending array tasks start only every few seconds
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,bf_interval=1",
        # finished tasks stay visible to `scontrol show job` long enough to be read; a
        # cancelled task is killed 2 s after its SIGTERM
        "MinJobAge=600", "KillWait=2",
        f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        ""])


def _wait_idle(env: dict[str, str], procs: list[subprocess.Popen], work: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise SlurmUnavailable(f"{proc.args[0]} exited ({proc.returncode}): "
                                       + _log_tail(work))
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True,
                             text=True, timeout=10).stdout
        if "idle" in out.split():
            return
        time.sleep(0.1)
    raise SlurmUnavailable(f"the node did not become idle within {START_TIMEOUT_S:.0f} s: "
                           + _log_tail(work))


def _log_tail(work: Path) -> str:
    tails = []
    for name in ("slurmctld.log", "slurmd.log"):
        path = work / name
        if path.exists():
            tails.append(f"{name}: " + " | ".join(path.read_text(errors="replace").splitlines()[-3:]))
    return "; ".join(tails) or "no daemon log"


@contextlib.contextmanager
def slurm_cluster(work: Path, cpus: int = 2) -> Iterator[SlurmCluster]:
    """Start slurmctld and slurmd for one node `localhost`; yields the cluster; stops it after."""
    reason = slurm_unavailable()
    if reason:
        raise SlurmUnavailable(reason)
    work.mkdir(parents=True, exist_ok=True)
    (work / "state").mkdir(exist_ok=True)
    user = getpass.getuser()
    conf = work / "slurm.conf"
    memory_mb = node_memory_mb()
    env = dict(os.environ, SLURM_CONF=str(conf))
    for name in list(env):   # a surrounding job's settings must not leak into ours
        if name.startswith(("SLURM_", "SBATCH_", "SQUEUE_")) and name != "SLURM_CONF":
            env.pop(name)
    procs: list[subprocess.Popen] = []
    spool = Path(tempfile.mkdtemp(prefix="sl-", dir="/tmp"))   # job steps' sockets: short paths
    try:
        conf.write_text(config_text(work, user, cpus, memory_mb, spool))
        # -c: no state from an earlier run; setsid: Ctrl-C in a terminal does not reach them
        procs.append(subprocess.Popen(["slurmctld", "-D", "-c"], env=env, start_new_session=True,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(["slurmd", "-D", "-N", "localhost"], env=env,
                                      start_new_session=True, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_idle(env, procs, work)
        yield SlurmCluster(conf=conf, env=env, work=work)
    finally:
        try:
            _stop(env, procs, user)
        finally:
            shutil.rmtree(spool, ignore_errors=True)


def _stop(env: dict[str, str], procs: list[subprocess.Popen], user: str) -> None:
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(["scancel", "-u", user], env=env, capture_output=True, timeout=10)
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True, timeout=10)
    for proc in procs:
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)
