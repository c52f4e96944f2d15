"""Implementation of build-locally.py: build .ci_support configs in containers or natively.

Standard library only: this package runs with a bare ``python3`` (even ``python3 -S``).
Data flow: ci_yaml (read a config) -> configs (what it builds) -> selection -> plan
(command, environment, marker, log) -> preflight -> batch/runner (run, tee, summarise) ->
in_container/build_steps.sh (what runs in the container, or natively: conda-build or
rattler-build through in_container/rattler_build_py.py, tests, the channel index).
slurm/ submits the same per-config builds as a Slurm job array (``--scheduler slurm``).
"""
