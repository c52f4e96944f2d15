"""Helpers for the end-to-end layout test on the real PyTorch wheel (tests/megabuild/test_staging_real_wheel.py)."""
