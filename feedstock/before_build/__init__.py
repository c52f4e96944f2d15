"""What comes before a build: render the recipe and its variants, write CI, check the feedstock,
and the maintainer's tools (bump, patches, the dependency table)."""
