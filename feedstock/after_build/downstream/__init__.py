"""Dependents: packages written elsewhere, built and tested against this feedstock's packages
(`python -m feedstock downstream`, docs/dependents.md).

catalog (recipe/dependents.yaml) -> channel (which pytorch builds it holds) -> environments
(rattler installs our pytorch) -> one runner per kind (pip_wheel, conda_package) -> pytest
counts (testrun) -> one table row each (table).
"""
