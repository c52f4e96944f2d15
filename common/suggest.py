"""'Did you mean ...?' for a mistyped name: the one implementation, for build-locally.py and the
feedstock tools alike (standard library only, as this package is)."""
from __future__ import annotations

import difflib
import os.path


def close_names(wrong: str, choices: list[str], limit: int = 3) -> list[str]:
    """The closest choices, best first: those that start with or contain what was typed; then
    those sharing the longest start with it when most of it is right (generated config names
    differ late, so similarity alone can pick another platform's name); then difflib's similar
    names; last, a case-insensitive substring match."""
    if not wrong:
        return []
    contains = [c for c in choices if c.startswith(wrong) or wrong in c]
    shared = {c: len(os.path.commonprefix([wrong, c])) for c in choices}
    longest = max(shared.values(), default=0)
    same_start = sorted((c for c in choices if 2 * longest > len(wrong) and shared[c] == longest),
                        key=lambda c: -difflib.SequenceMatcher(None, wrong, c).ratio())
    similar = difflib.get_close_matches(wrong, choices, n=limit, cutoff=0.5)
    found = list(dict.fromkeys(contains + same_start + similar))
    if not found:
        found = [c for c in choices if wrong.lower() in c.lower()]
    return found[:limit]


def did_you_mean(wrong: str, choices: list[str], limit: int = 1) -> str | None:
    """The one phrase: `did you mean A?` (or `did you mean A, B?` with a larger limit) for the
    closest choices, a name that differs only in case first; None when nothing is close."""
    same_but_case = [c for c in choices if c.lower() == wrong.lower() and c != wrong]
    close = list(dict.fromkeys(same_but_case + close_names(wrong, choices, limit)))[:limit]
    return f"did you mean {', '.join(close)}?" if close else None
