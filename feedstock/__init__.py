"""Maintainer tooling of this feedstock: ``python -m feedstock {rerender,render,lint}``.

Modules, in data-flow order: platforms/selectors -> variant_config (config files per platform)
-> matrix (expand) -> recipe_render/used_vars/variants (which keys the recipe uses) -> ci_jobs
(group into CI jobs) -> ci_support (write .ci_support/) -> render (one job's outputs) -> lint.
"""
