"""Rendering: conda-build's rules for reading the recipe (selectors, Jinja functions, used
variables, the variant matrix) and the outputs of one job. Uses only layout, platforms, errors, suggest."""
