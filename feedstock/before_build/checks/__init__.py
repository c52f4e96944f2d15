"""Consistency checks a maintainer runs before pushing: lint, meta.yaml/recipe.yaml parity and the
recipe against the driver's own facts. Uses ci, render and the top-level modules."""
