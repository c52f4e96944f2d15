"""The test project's stand-in for the torch package."""
from torch._C import compiled_for, self_test  # noqa: F401
