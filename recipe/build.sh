#!/bin/bash
# Every build step of this recipe (the top-level split build and the libtorch,
# libtorch-cuda-linalg and pytorch outputs) is done by the Python driver in
# recipe/megabuild; it dispatches on PKG_NAME and reads the variant from the environment.
set -euo pipefail
export PYTHONPATH="${RECIPE_DIR}${PYTHONPATH:+:${PYTHONPATH}}"
exec "${BUILD_PREFIX}/bin/python" -m megabuild "$@"
