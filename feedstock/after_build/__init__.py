"""What uses the built packages: runtime container images and the downstream matrix."""
