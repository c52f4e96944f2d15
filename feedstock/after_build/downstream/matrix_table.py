"""The matrix as text (the terminal), Markdown (a bump's summary) and JSON (what a CI job reads)."""
from __future__ import annotations

from .matrix import KINDS, Matrix, regressions


def _grid(matrix: Matrix) -> list[tuple[str, ...]]:
    header = ("dependent", *(c.label for c in matrix.columns))
    return [header, *((f"{row.name} {row.version}", *(cell.kind for cell in row.cells)) for row in matrix.rows)]


def _reasons(matrix: Matrix) -> list[str]:
    return [f"{row.name} {row.version} on {column.label}: {cell.kind}: {cell.reason}"
            for row in matrix.rows for column, cell in zip(matrix.columns, row.cells) if cell.reason]


def summary_line(matrix: Matrix) -> str:
    counts = matrix.counts()
    return (f"downstream matrix: {len(matrix.rows)} dependents x {len(matrix.columns)} pytorch builds; "
            + ", ".join(f"{counts[kind]} {kind}" for kind in KINDS))


def format_matrix(matrix: Matrix) -> str:
    """The table, then one line per cell that has a reason, then the regressions (if any)."""
    body = _grid(matrix)
    widths = [max(len(line[i]) for line in body) for i in range(len(body[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths)) + " |" for line in body]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += [f"  {reason}" for reason in _reasons(matrix)]
    lines += [f"regression: {line}" for line in regressions(matrix)]
    return "\n".join(lines)


def format_markdown(matrix: Matrix, title: str) -> str:
    """A section for a bump's summary (GitHub's step summary, a pull request)."""
    body = _grid(matrix)
    lines = [f"### {title}", "", "| " + " | ".join(body[0]) + " |", "|" + "---|" * len(body[0])]
    lines += ["| " + " | ".join(line) + " |" for line in body[1:]]
    reasons = _reasons(matrix)
    if reasons:
        lines += ["", *(f"- {reason}" for reason in reasons)]
    found = regressions(matrix)
    lines += ["", *(f"- **regression**: {line}" for line in found)] if found else \
        ["", f"No dependent that works on {matrix.old} is broken on {matrix.new}."]
    return "\n".join(lines + ["", summary_line(matrix), ""])


def matrix_json(matrix: Matrix) -> dict:
    return {
        "columns": [{"label": c.label, "version": c.version, "flavour": c.flavour, "build": c.build.build,
                     "python": c.build.python} for c in matrix.columns],
        "dependents": [{"name": row.name, "version": row.version, "built": row.built,
                        "cells": {c.label: cell.to_dict() for c, cell in zip(matrix.columns, row.cells)}}
                       for row in matrix.rows],
        "counts": matrix.counts(),
        "old": matrix.old, "new": matrix.new,
        "regressions": regressions(matrix),
    }
