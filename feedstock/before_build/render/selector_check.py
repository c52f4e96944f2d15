"""The selector checks that `lint` reports and `rerender` refuses to write past.

An unknown name in a selector reads as False (conda-build's rule), so a typo such as
`# [x86_65]` silently drops every line it guards: in `conda_build_config.yaml` whole jobs.
`check_selectors` finds those, selectors that do not parse, and (in `meta.yaml`) the spacing
conda-smithy's lint asks for: at least two spaces before `#` and one between `#` and `[`.
"""
from __future__ import annotations

import re
from pathlib import Path

from ...errors import FeedstockError
from ...layout import Feedstock
from ...platforms import known_selector_names
from common.suggest import did_you_mean
from ...text_input import read_text
from .selectors import check_selector, selector_names, split_selectors

# conda-smithy's form for a selector comment: `value  # [expr]`
GOOD_SELECTOR_FORM = re.compile(r"\S\s{2,}# \[[^\[\]]+\]")
TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):", re.MULTILINE)


def all_variant_keys(feedstock: Feedstock) -> set[str]:
    """Variant keys named anywhere in the config files (read as text: works when parsing fails)."""
    keys: set[str] = set()
    for path in feedstock.variant_config_files():
        keys |= set(TOP_LEVEL_KEY.findall(read_text(path, _rel(feedstock, path))))
    return keys


def _rel(feedstock: Feedstock, path: Path) -> str:
    try:
        return str(path.relative_to(feedstock.root))
    except ValueError:
        return str(path)


def check_selectors(feedstock: Feedstock, variant_keys: set[str], style: bool = True) -> list[str]:
    """Every selector parses, names only platform names, variant keys or environ/os, and (with
    `style`) in meta.yaml has conda-smithy's spacing. One finding a line."""
    findings = []
    known = known_selector_names() | variant_keys
    for path in [feedstock.meta_yaml, *feedstock.variant_config_files()]:
        text = read_text(path, _rel(feedstock, path))
        raw_lines = text.splitlines()
        for line in split_selectors(text):
            if line.selector is None:
                continue
            where = f"{_rel(feedstock, path)}:{line.lineno}"
            problem = check_selector(line.selector)
            if problem:
                findings.append(f"{where}: selector [{line.selector}] does not parse ({problem})")
                continue
            unknown = sorted(selector_names(line.selector) - known)
            if unknown:
                hints = [f"{name} ({phrase})" if phrase else name
                         for name in unknown for phrase in [did_you_mean(name, sorted(known), 2)]]
                findings.append(f"{where}: selector [{line.selector}] uses unknown name(s) "
                                f"{', '.join(hints)} (always False, so the line is dropped); "
                                "use a platform name or a variant key")
            elif style and path == feedstock.meta_yaml and not GOOD_SELECTOR_FORM.search(raw_lines[line.lineno - 1]):
                findings.append(f"{where}: selector [{line.selector}] should read "
                                "`value  # [expr]`: two spaces before # and one after it "
                                "(conda-smithy's lint)")
    return findings


def refuse_bad_selectors(feedstock: Feedstock, then: str) -> None:
    """Stop a command before it writes or prints anything when a selector does not parse or
    names an unknown name (the lines it guards would vanish without a word); `then` ends the
    message ("rerender wrote nothing", "fix it, then render again")."""
    problems = check_selectors(feedstock, all_variant_keys(feedstock), style=False)
    if problems:
        more = f" ({len(problems) - 1} more: python -m feedstock lint)" if len(problems) > 1 else ""
        raise FeedstockError(f"{problems[0]}{more}; {then}")
