"""megabuild: the feedstock's PyTorch build driver (standard library only).

conda-build runs `recipe/build.sh` for the top-level build and for every output; it runs
`python -m megabuild`, which picks the step from PKG_NAME (see `steps`). Modules:
`context` (what a step gets), `build_env` (the one environment function), `frontend` (how
PyTorch's build is invoked), `cmake_cache` (lossless CMakeCache.txt model), `python_target`
(what CMake knows about an interpreter), `retarget` (rewriting a cache for another Python),
`staging` (file moves), `steps`, `log`.
"""
