"""A selector nested past the depth limit is the parser's one complaint, not compile()'s
RecursionError (issue 49, part 4)."""
from __future__ import annotations

import pytest

from feedstock.before_build.render.selectors import check_selector, evaluate
from feedstock.errors import FeedstockError


def test_a_selector_of_thousands_of_nots_is_one_complaint():
    deep = "not " * 3000 + "linux"
    assert check_selector(deep) == "nested more than 64 levels deep, the limit for an expression"
    with pytest.raises(FeedstockError, match=r"recipe/meta.yaml:3: selector \[not not .* does not parse "
                                             r"\(nested more than 64 levels deep"):
        evaluate(deep, {"linux": True}, "recipe/meta.yaml:3")


def test_an_ordinary_selector_still_parses():
    assert check_selector("linux and not (aarch64 or ppc64le) and cuda_compiler_version != 'None'") is None
    assert evaluate("not not linux", {"linux": True}) is True
