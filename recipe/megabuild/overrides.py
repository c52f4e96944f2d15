"""The variables a build takes from outside the recipe: the developer overrides that
build-locally.py's flags set (and a developer may export), named once. Both recipes must pass
each of them into the build (meta.yaml's script_env, recipe.yaml's script env and secrets);
`python -m feedstock lint` checks that against this list.
"""
from __future__ import annotations

# set by build-locally.py's flags (--jobs, --heavy-jobs, --cuda-arch, --rocm-arch, --python and
# --dev-tag, --compile-cache[-read-only], --ccache): a native build gets the flags' values only
FLAG_VARIABLES = ("FEEDSTOCK_MAX_JOBS", "FEEDSTOCK_HEAVY_JOBS", "FEEDSTOCK_CUDA_ARCH_LIST",
                  "FEEDSTOCK_ROCM_ARCH", "FEEDSTOCK_DEV_TAG", "FEEDSTOCK_COMPILE_CACHE",
                  "FEEDSTOCK_COMPILE_CACHE_READ_ONLY", "CCACHE_DIR")
# a secret, passed by name (never on a command line)
SECRET_VARIABLES = ("FEEDSTOCK_COMPILE_CACHE_PASSWORD",)
# the tests' front-end override (megabuild/frontend.py): a developer's, never a flag's
DEVELOPER_VARIABLES = ("MEGABUILD_FRONTEND",)
OVERRIDE_VARIABLES = FLAG_VARIABLES + SECRET_VARIABLES + DEVELOPER_VARIABLES
