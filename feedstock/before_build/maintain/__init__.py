"""Maintainer tools: bump to a new release, the vendored-dependency table, the patch series.
Uses ci (a bump rerenders), render's siblings at the top level; never checks."""
