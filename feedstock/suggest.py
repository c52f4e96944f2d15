"""'Did you mean ...?' for names a user mistyped."""
from __future__ import annotations

import difflib


def close_names(wrong: str, choices: list[str], limit: int = 3) -> list[str]:
    """Closest choices: prefix/substring matches first, then difflib's similar names."""
    contains = [c for c in choices if wrong and (c.startswith(wrong) or wrong in c)]
    similar = difflib.get_close_matches(wrong, choices, n=limit, cutoff=0.5)
    return list(dict.fromkeys(contains + similar))[:limit]
