"""Helpers for the end-to-end layout test on the real PyTorch wheel (tests/test_layout_real_wheel.py)."""
