"""'Did you mean ...?' for names a user mistyped."""
from __future__ import annotations

import difflib
import os.path


def close_names(wrong: str, choices: list[str], limit: int = 3) -> list[str]:
    """Closest choices: prefix/substring matches, then the names sharing the longest start
    (generated job names differ late, so similarity alone picks names of the wrong platform),
    then difflib's similar names."""
    contains = [c for c in choices if wrong and (c.startswith(wrong) or wrong in c)]
    shared = {c: len(os.path.commonprefix([wrong, c])) for c in choices}
    longest = max(shared.values(), default=0)
    same_start = [c for c in choices if wrong and 2 * longest > len(wrong) and shared[c] == longest]
    same_start.sort(key=lambda c: -difflib.SequenceMatcher(None, wrong, c).ratio())
    similar = difflib.get_close_matches(wrong, choices, n=limit, cutoff=0.5)
    return list(dict.fromkeys(contains + same_start + similar))[:limit]
