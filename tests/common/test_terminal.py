"""common/terminal.py: what a command prints survives an ASCII terminal (issue 49, part 3)."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.support.paths import REPO_ROOT

C_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def test_a_non_ascii_line_and_a_non_ascii_path_print_under_the_c_locale(tmp_path):
    folder = tmp_path / "caf\u00e9"
    folder.mkdir()
    script = ("import os, sys; sys.path.insert(0, sys.argv[1])\n"
              "from common.terminal import printable_anywhere\nprintable_anywhere()\n"
              "print('summary: caf\\u00e9 \\u2014'); print(os.getcwd()); print('err \\u00e9', file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", script, str(REPO_ROOT)], cwd=folder, capture_output=True,
                          env={**os.environ, **C_LOCALE})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode("ascii", errors="replace").splitlines()
    assert out[0] == "summary: caf\\xe9 \\u2014"
    # the path's own bytes come out as they are: the folder reads as the user named it
    assert proc.stdout.splitlines()[1] == os.fsencode(folder)
    assert proc.stderr == b"err \\xe9\n"
