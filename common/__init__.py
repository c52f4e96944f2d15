"""The ground floor: what build-locally (`localbuild/`) and the feedstock tools (`feedstock/`)
both stand on. Standard library only, and it imports nothing else of this repository, since
build-locally.py runs in bare environments. `localbuild/` and `feedstock/` never import each
other; what both need lives here:

- `suggest`: the did-you-mean of a mistyped name;
- `input_files`: the bounded reading of a file a user gave (regular files only, none of a
  pseudo-filesystem, a size limit and a deadline), its one decoding (UTF-8, no NUL) and the
  limit on a variant matrix;
- `nesting`: the depth limit of every input (selector expressions, TOML, JSON), counted before
  a parser recurses;
- `path_kinds`: what a path is, and whether it is the folder a command needs;
- `terminal`: stdout and stderr that survive an ASCII terminal (each entry point sets them);
- `hashing`: a file's sha256;
- `driver`: the build driver (recipe/megabuild) loaded from a feedstock.

recipe/megabuild/ stays self-contained: conda-build copies only recipe/.
"""
