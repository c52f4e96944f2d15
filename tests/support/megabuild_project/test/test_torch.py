"""test_torch.py of the PyTorch-shaped test project: PyTorch's file of this name is in the curated
selection (recipe/pytorch_tests/selection.json); here it checks the installed megatorch package."""
import torch


def test_torch_package_imports_from_site_packages():
    assert "site-packages" in torch.__file__
