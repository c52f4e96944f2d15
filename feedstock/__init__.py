"""The feedstock's own tools: ``python -m feedstock
{rerender,render,lint,parity,bump,deps,patches,downstream,image}``.

Two rooms, by where they stand in the flow:
- ``before_build/``: what turns the recipe and its pins into jobs and checks them: render (the
  variant matrix, one job's outputs) -> ci (``.ci_support/``, the workflow) -> checks (lint,
  parity) and maintain (bump, deps, patches).
- ``after_build/``: what uses the packages in ``build_artifacts/``: image (runtime images) and
  downstream (dependents built and tested against them).

Imports run one way: cli -> after_build, before_build -> the top-level modules (layout,
platforms, errors, atomic_files, text_input, dependents_catalog); nothing in before_build imports
after_build.
What build-locally.py needs too (did-you-mean, bounded reading, hashing, the driver loader)
lives in the ground floor, `common/`; `feedstock/` and `localbuild/` never import each other.
"""
