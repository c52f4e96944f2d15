"""Maintainer tooling of this feedstock: ``python -m feedstock {rerender,render,lint,parity,bump,deps,patches}``.

Subpackages by stage, imports running one way only: cli -> checks, maintain -> ci -> render
-> the top-level modules (layout, platforms, errors, suggest, atomic_files).
"""
