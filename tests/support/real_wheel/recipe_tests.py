"""The recipe's own test section for the outputs the layout test reproduces.

The recipe is rendered with the feedstock's renderer (feedstock.before_build.render, the same code behind
`python -m feedstock render`) for the linux-64 CPU, generic-BLAS job, the variant the real CPU
wheel stands in for. The test commands are split by what they need: file checks (`test ...`)
that a shell evaluates against the prefix, runtime commands (Python, pip, entry points) run with
the prefix's bin/ first on PATH, and CMake commands (the layout test builds the recipe's
cmake_test itself).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from feedstock.before_build.render.outputs import render_ci_config

WHEEL_VARIANT = {"target_platform": "linux-64", "gpu_backend": "cpu", "blas_impl": "generic"}


@dataclass(frozen=True)
class RecipeTests:
    output: str
    config: str
    imports: list[str]
    commands: list[str]

    @property
    def file_checks(self) -> list[str]:
        return [c for c in self.commands if c.startswith("test ")]

    @property
    def cmake_commands(self) -> list[str]:
        """Commands that configure, build or use the recipe's cmake_test project."""
        return [c for c in self.commands if "cmake_test" in c or c.split()[0] == "cmake"]

    @property
    def runtime_commands(self) -> list[str]:
        """The rest: python -c ..., pip check, entry points."""
        return [c for c in self.commands if c not in self.file_checks and c not in self.cmake_commands]

    def expected_files(self) -> list[str]:
        """`test -f $PREFIX/...` / `$SP_DIR/...` paths, as written (variables unexpanded)."""
        found = []
        for command in self.file_checks:
            words = shlex.split(command)
            if len(words) == 3 and words[1] in ("-f", "-e", "-d"):
                found.append(words[2])
        return found


def wheel_job(feedstock_root: Path) -> str:
    """The .ci_support job the CPU wheel stands in for, or a one-line error."""
    for path in sorted((feedstock_root / ".ci_support").glob("*.yaml")):
        values = yaml.safe_load(path.read_text()) or {}
        if all([str(v) for v in values.get(k, [])] == [want] for k, want in WHEEL_VARIANT.items()):
            return path.stem
    raise FileNotFoundError(f"no .ci_support job with {WHEEL_VARIANT}; "
                            "run `python -m feedstock rerender`")


def recipe_tests(feedstock_root: Path, output: str, python: str = "3.11") -> RecipeTests:
    job = wheel_job(feedstock_root)
    candidates = [o for o in render_ci_config(feedstock_root, job) if o.name == output]
    if output == "pytorch":
        candidates = [o for o in candidates if re.match(rf"{re.escape(python)}(\.|\*| |$)",
                                                         str(o.variant.get("python", "")))]
    if len(candidates) != 1:
        raise LookupError(f"{job}: expected one rendered {output} output (python {python}), "
                          f"found {len(candidates)}")
    tests = candidates[0].tests or {}
    return RecipeTests(output, job, [str(i) for i in tests.get("imports") or []],
                       [str(c) for c in tests.get("commands") or []])
