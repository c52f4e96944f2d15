"""--scheduler slurm: the resource options of every array task, checked before anything runs.

Only the format is checked here (a `--time` Slurm would refuse); whether the partition,
account or GPU request exists is the controller's answer (slurm_client.check_submission).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..errors import EXIT_USAGE, LocalBuildError

# Slurm's time formats (sbatch(1), --time): MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME = re.compile(r"^(\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2})$")
_UNLIMITED = ("infinite", "unlimited")
_MEMORY = re.compile(r"^\d+[KMGT]?$", re.IGNORECASE)
# what sbatch --gpus takes: COUNT or TYPE:COUNT, the count at least 1
_GPUS = re.compile(r"^([A-Za-z0-9_.-]+:)?0*[1-9][0-9]*$")


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    gpus: str | None = None
    extra: tuple[str, ...] = ()      # --sbatch-arg, each already split like a shell would

    def sbatch_arguments(self) -> list[str]:
        """The options every task gets (also written as #SBATCH lines of the array script)."""
        args = []
        for flag, value in (("--partition", self.partition), ("--account", self.account),
                            ("--time", self.time), ("--mem", self.mem), ("--gpus", self.gpus)):
            if value:
                args.append(f"{flag}={value}")
        if self.cpus_per_task:
            args.append(f"--cpus-per-task={self.cpus_per_task}")
        return args + list(self.extra)


def check_time(value: str) -> str:
    """A Slurm time limit as sbatch accepts it, else one line saying which forms work."""
    text = value.strip()
    if text.lower() in _UNLIMITED or _TIME.match(text):
        return text
    raise LocalBuildError(f"--time {value!r} is not a Slurm time; give MINUTES, HH:MM:SS or "
                          "DAYS-HH[:MM[:SS]] (e.g. 360, 6:00:00 or 1-12)", EXIT_USAGE)


def parse_slurm_options(partition: str | None, account: str | None, time: str | None,
                        cpus_per_task: int | None, mem: str | None, gpus: str | None,
                        sbatch_args: list[str] | None) -> SlurmOptions:
    if cpus_per_task is not None and cpus_per_task < 1:
        raise LocalBuildError(f"--cpus-per-task {cpus_per_task}: give 1 or more", EXIT_USAGE)
    if mem is not None and not _MEMORY.match(mem):
        raise LocalBuildError(f"--mem {mem!r} is not a Slurm memory size; give a number with an "
                              "optional K, M, G or T suffix (e.g. 64G)", EXIT_USAGE)
    if gpus is not None and not _GPUS.match(gpus):
        raise LocalBuildError(f"--gpus {gpus!r}: give a count or TYPE:COUNT with a count of 1 or "
                              "more (e.g. 1 or a100:2)", EXIT_USAGE)
    extra: list[str] = []
    for value in sbatch_args or []:
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise LocalBuildError(f"--sbatch-arg {value!r} cannot be split ({exc})",
                                  EXIT_USAGE) from None
        if any(word.startswith(("--array", "-a", "--dependency", "-d", "--wrap")) for word in words):
            raise LocalBuildError(f"--sbatch-arg {value!r}: build-locally sets the array, the "
                                  "dependency and the script itself; leave them out", EXIT_USAGE)
        extra += words
    return SlurmOptions(partition=partition, account=account,
                        time=check_time(time) if time is not None else None,
                        cpus_per_task=cpus_per_task, mem=mem, gpus=gpus, extra=tuple(extra))
