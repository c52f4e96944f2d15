"""The packages' imports run one way (issue 36): `common/` (the ground floor) imports nothing
else of this repository; `localbuild/` and `feedstock/` stand on it and never import each other;
inside `feedstock/`, before_build never imports after_build; the driver's front ends do not
import each other. Read from the source, every import statement, lazy ones included."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

RULES = [
    ("common", {"localbuild", "feedstock", "tests", "megabuild", "devtools", "benchmarks"}),
    ("localbuild", {"feedstock", "tests"}),
    ("feedstock", {"localbuild", "tests"}),
]


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file; relative ones resolved."""
    package = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                found.append((node.lineno, ".".join([*base, *([node.module] if node.module else [])])))
            elif node.module:
                found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("package, banned", RULES, ids=[rule[0] for rule in RULES])
def test_no_import_runs_back_up(package, banned):
    wrong = [f"{path.relative_to(REPO_ROOT)}:{line}: {name}"
             for path in sorted((REPO_ROOT / package).rglob("*.py"))
             for line, name in imported(path) if name.split(".")[0] in banned]
    assert wrong == []


def test_before_build_never_imports_after_build():
    wrong = [f"{path.relative_to(REPO_ROOT)}:{line}: {name}"
             for path in sorted((REPO_ROOT / "feedstock" / "before_build").rglob("*.py"))
             for line, name in imported(path) if name.startswith("feedstock.after_build")]
    assert wrong == []


def test_the_drivers_front_ends_do_not_import_each_other():
    driver = REPO_ROOT / "recipe" / "megabuild"
    frontend = {name for _, name in imported(driver / "frontend.py")}
    scikit = {name for _, name in imported(driver / "scikit_build.py")}
    assert "recipe.megabuild.frontend" not in scikit
    # frontend.py may pick scikit_build's front end, lazily; scikit_build.py must not import frontend.py
    assert all(not name.endswith("megabuild.frontend") for name in scikit), scikit
    assert "recipe.megabuild.build_commands" in frontend and "recipe.megabuild.build_commands" in scikit
