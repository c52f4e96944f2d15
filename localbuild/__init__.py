"""Implementation of build-locally.py: build .ci_support configs in containers or natively.

Standard library only: this package runs with a bare ``python3`` (even ``python3 -S``).
Data flow: ci_yaml (read a config) -> configs (what it builds) -> selection -> plan
(command, environment, marker, log) -> preflight -> batch/runner (run, tee, summarise).
"""
