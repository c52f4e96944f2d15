"""$MEGABUILD_FRONTEND: the developer override that replaces setup.py (the real-wheel build uses it)."""
from __future__ import annotations

from pathlib import Path

import pytest

from megabuild.errors import MegabuildError
from megabuild.frontend import SetupPyFrontend, select_frontend


def test_unset_means_setup_py():
    assert isinstance(select_frontend({}), SetupPyFrontend)
    assert isinstance(select_frontend({"MEGABUILD_FRONTEND": ""}), SetupPyFrontend)


def test_file_with_frontend_function_is_used(tmp_path: Path):
    file = tmp_path / "override.py"
    file.write_text("class Mine:\n    def build_dir(self, ctx): return None\n"
                    "    def build(self, ctx): pass\n    def install(self, ctx): pass\n"
                    "def frontend():\n    return Mine()\n")
    assert type(select_frontend({"MEGABUILD_FRONTEND": str(file)})).__name__ == "Mine"


@pytest.mark.parametrize("text, message", [
    (None, "is not a file"),
    ("x = 1\n", "defines no frontend() function"),
    ("def frontend():\n    return object()\n", "lacks build_dir, build, install()"),
])
def test_bad_override_is_one_clear_error(tmp_path: Path, text, message):
    file = tmp_path / "override.py"
    if text is not None:
        file.write_text(text)
    with pytest.raises(MegabuildError) as err:
        select_frontend({"MEGABUILD_FRONTEND": str(file)})
    assert message in str(err.value) and "\n" not in str(err.value)
