"""Which configs to build: names, --all, --filter, or a numbered menu on a terminal."""
from __future__ import annotations

import re
from typing import Callable, TextIO

from .bounded_search import check_pattern, search_every
from .errors import EXIT_INTERRUPTED, EXIT_USAGE, LocalBuildError
from common.suggest import did_you_mean


def compile_filters(patterns: list[str]) -> list[re.Pattern[str]]:
    """Each --filter compiled; one error line for one too long or no regular expression."""
    return [check_pattern(pattern) for pattern in patterns]


def apply_filters(names: list[str], filters: list[re.Pattern[str]]) -> list[str]:
    """Names matching every filter (re.search), so repeated --filter narrows the set; a user's
    pattern may backtrack without end, so the search runs under a deadline."""
    return search_every([f.pattern for f in filters], names)


def select(names: list[str], wanted: list[str], use_all: bool, filter_patterns: list[str],
           interactive: bool, ask: Callable[[list[str]], list[str]]) -> list[str]:
    """The configs to build, in the order given (names) or sorted (--all/--filter/menu)."""
    if wanted and (use_all or filter_patterns):
        raise LocalBuildError("give config names, or --all/--filter, not both", EXIT_USAGE)
    if wanted:
        chosen: list[str] = []
        for name in wanted:
            name = _strip_config_path(name)
            if name not in names:
                hint = did_you_mean(name, names, limit=3) or f"{len(names)} configs exist, see --list"
                raise LocalBuildError(f"config '{name}' not found in .ci_support/; {hint}",
                                      EXIT_USAGE)
            if name not in chosen:
                chosen.append(name)
        return chosen
    candidates = apply_filters(names, compile_filters(filter_patterns))
    if not candidates:
        raise LocalBuildError(
            f"no config matches --filter {' --filter '.join(filter_patterns)}; "
            f"configs: {', '.join(names)}", EXIT_USAGE)
    if use_all or filter_patterns:
        return candidates
    if len(candidates) == 1:
        return candidates
    if not interactive:
        raise LocalBuildError(
            "no config given and no terminal to ask on; name one of: " + ", ".join(candidates)
            + " (or use --all / --filter REGEX)", EXIT_USAGE)
    return ask(candidates)


def _strip_config_path(name: str) -> str:
    """Accept '.ci_support/x.yaml' and 'x.yaml' as well as 'x' (shell completion gives paths)."""
    if name.endswith(".yaml"):
        name = name[:-5]
    return name.rsplit("/", 1)[-1]


def parse_menu_answer(answer: str, count: int) -> list[int] | None:
    """'2', '1,3-4', '1 3', 'a' -> 0-based indices; None when the answer is not understood."""
    answer = answer.strip().lower()
    if answer in ("a", "all"):
        return list(range(count))
    indices: list[int] = []
    for part in re.split(r"[,\s]+", answer):
        if not part:
            continue
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            return None
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if not (1 <= low <= high <= count):
            return None
        indices += [i - 1 for i in range(low, high + 1) if i - 1 not in indices]
    return indices or None


def menu(candidates: list[str], describe: Callable[[str], str], stdin: TextIO,
         stdout: TextIO) -> list[str]:
    """Numbered menu; re-asks on a wrong answer; empty answer / EOF cancels (exit 2)."""
    width = max(len(name) for name in candidates)
    stdout.write("Configs in .ci_support/:\n")
    for number, name in enumerate(candidates, 1):
        stdout.write(f"  {number:>3}. {name:<{width}}  {describe(name)}\n")
    for _attempt in range(5):
        stdout.write("Build which? number(s), e.g. 2 or 1,3-4; 'a' for all; Enter to cancel: ")
        stdout.flush()
        try:
            answer = stdin.readline()
        except KeyboardInterrupt:
            raise LocalBuildError("cancelled", EXIT_INTERRUPTED) from None
        if not answer.strip():
            raise LocalBuildError("no config selected", EXIT_USAGE)
        indices = parse_menu_answer(answer, len(candidates))
        if indices is not None:
            return [candidates[i] for i in indices]
        stdout.write(f"  not understood: {answer.strip()!r} (numbers 1-{len(candidates)})\n")
    raise LocalBuildError("no config selected", EXIT_USAGE)
