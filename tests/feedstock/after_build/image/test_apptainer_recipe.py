"""The Apptainer.def written beside every image (feedstock/after_build/image/oci.py): the SIF
steps an HPC site takes, the flavour's device flag, and that nothing here has built it."""
from __future__ import annotations

import pytest

from feedstock.after_build.image.oci import apptainer_recipe


@pytest.mark.parametrize("flavour, flag, says", [
    ("cpu", "apptainer run pytorch.sif", None),
    ("gpu", "apptainer run --nv pytorch.sif", "--nv binds the host's NVIDIA driver"),
    ("rocm", "apptainer exec --rocm --bind /scratch", "--rocm binds the host's ROCm driver stack"),
])
def test_the_recipe_says_how_a_site_makes_and_runs_the_sif(flavour, flag, says):
    recipe = apptainer_recipe("image.tar", f"localhost/pytorch-{flavour}:2.13.0-py311", flavour)
    assert "Bootstrap: docker-archive\nFrom: image.tar\n" in recipe
    assert "apptainer build pytorch.sif Apptainer.def" in recipe and "APPTAINER_TMPDIR" in recipe
    assert flag in recipe
    assert (says in recipe) if says else ("--nv" not in recipe and "--rocm" not in recipe)
    assert "Not proven here: Apptainer cannot be installed" in recipe
    # every line before the header is a comment: Apptainer reads the header keywords only
    header = recipe.split("Bootstrap:")[0]
    assert all(line.startswith("#") for line in header.splitlines())
