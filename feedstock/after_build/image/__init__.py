"""``python -m feedstock image``: runtime images of the built packages, torch in a layer of its own.

Modules, imports running one way: build (the command) -> base, environment, requirements,
oci -> layers, tools. The layers, bottom up: the base (mmdebstrap, a rootfs tar or an OCI
layout), torch (libtorch, libtorch-cuda-linalg, pytorch: the same bytes in every image of one
build), the rest of the conda environment at /opt/env, and optionally the app's pip
requirements. Every layer tar is written deterministically, so the same inputs give the same
manifest digest.
"""
