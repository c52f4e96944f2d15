"""Code generation run with the build interpreter, like PyTorch's torchgen."""
