"""The two batch scripts of a Slurm submission and their sbatch command lines.

The array script runs, as task N, `build-locally.py CONFIG_N ... --array-task JOBDIR`: the very
per-config build a local batch runs, minus the channel index (tasks would race on
repodata.json) and minus the build_artifacts/ lock (it would serialise the array). The final
script depends on the array with `afterany` (it runs however the tasks ended), indexes the
channel once and writes the summary (localbuild/slurm/finish.py).

Resource options go on the sbatch command line, not into #SBATCH lines, so an --sbatch-arg of
two words (`--qos high`) needs no rewriting; --dry-run prints both.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from .options import SlurmOptions

JOB_NAME = "build-locally"
FINAL_JOB_NAME = "build-locally-index"


@dataclass(frozen=True)
class Submission:
    """What one `--scheduler slurm` run writes and submits (paths are on the shared filesystem)."""

    job_dir: Path                 # build_artifacts/slurm/<stamp>/
    configs: tuple[str, ...]      # task N builds configs[N]
    python: str                   # the interpreter the tasks run build-locally.py with
    feedstock_root: Path
    task_arguments: tuple[str, ...]   # build-locally.py options after the config name
    slurm: SlurmOptions

    @property
    def array_script(self) -> Path:
        return self.job_dir / "array.sh"

    @property
    def final_script(self) -> Path:
        return self.job_dir / "final.sh"

    def array_command(self) -> list[str]:
        return ["sbatch", "--parsable", f"--array=0-{len(self.configs) - 1}",
                f"--job-name={JOB_NAME}", f"--output={self.job_dir}/task-%a.out",
                *self.slurm.sbatch_arguments(), str(self.array_script)]

    def final_command(self, array_id: str) -> list[str]:
        # where and under which account, but none of the build's cores, memory or GPUs
        where = [f"--{key}={value}" for key, value in (("partition", self.slurm.partition),
                                                        ("account", self.slurm.account)) if value]
        return ["sbatch", "--parsable", f"--dependency=afterany:{array_id}",
                f"--job-name={FINAL_JOB_NAME}", f"--output={self.job_dir}/final.out",
                "--cpus-per-task=1", *where, str(self.final_script)]


def array_script_text(sub: Submission) -> str:
    root = shlex.quote(str(sub.feedstock_root))
    command = shlex.join([sub.python, str(sub.feedstock_root / "build-locally.py")])
    options = shlex.join([*sub.task_arguments, "--array-task", str(sub.job_dir)])
    configs = "\n".join(f"    {shlex.quote(name)}" for name in sub.configs)
    return f"""#!/bin/bash
# Written by build-locally.py --scheduler slurm: task N of the array builds configs[N],
# exactly as a local batch builds one config (log: build_artifacts/<config>-log.txt).
set -uo pipefail
configs=(
{configs}
)
config="${{configs[$SLURM_ARRAY_TASK_ID]}}"
# build with the cores Slurm gave this task, not the whole node's
if [[ -n "${{SLURM_CPUS_PER_TASK:-}}" ]]; then
    export CPU_COUNT="${{SLURM_CPUS_PER_TASK}}"
fi
cd {root}
exec {command} "$config" {options}
"""


def final_script_text(sub: Submission, array_id: str) -> str:
    root = shlex.quote(str(sub.feedstock_root))
    command = shlex.join([sub.python, "-m", "localbuild.slurm.finish", str(sub.job_dir), array_id])
    return f"""#!/bin/bash
# Written by build-locally.py --scheduler slurm: runs after every task of array job
# {array_id} (afterany), indexes build_artifacts/ once and writes the summary.
set -uo pipefail
cd {root}
exec {command}
"""
