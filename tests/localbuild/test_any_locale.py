"""build-locally in any locale (issue 49, part 3): under LC_ALL=C PYTHONUTF8=0, from a folder
whose name is not ASCII, --list and --dry-run work (the driver's package name hashed
str(path).encode() of a surrogate-escaped path: a traceback), and a refusal is one line."""
from __future__ import annotations

import os

from tests.support.build_locally import make_feedstock

CONFIG = "linux_64_blas_implgenericpython3.12.____cpython"
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def test_a_non_ascii_folder_under_the_c_locale(tmp_path):
    folder = tmp_path / "caf\u00e9"
    folder.mkdir()
    fs = make_feedstock(folder, {CONFIG: dict(blas="generic")})
    env = fs.env(**C_LOCALE)
    listed = fs.run("--list", env=env)
    assert listed.returncode == 0 and CONFIG in listed.stdout, listed.stderr
    dry = fs.run(CONFIG, "--dry-run", "--min-free-gb", "0", env=env)
    assert dry.returncode == 0 and "Traceback" not in dry.stderr, dry.stderr
    assert "caf\u00e9" in dry.stdout   # the folder's own bytes, read back as UTF-8 here
    wrong = fs.run(CONFIG + "x", "--dry-run", env=env)
    assert wrong.returncode == 2 and wrong.stderr.count("error:") == 1, wrong.stderr


def test_ci_support_of_the_wrong_kind_is_one_line(tmp_path):
    fs = make_feedstock(tmp_path, {CONFIG: dict(blas="generic")})
    ci = fs.root / ".ci_support"
    for path in ci.iterdir():
        path.unlink()
    ci.rmdir()
    ci.symlink_to(".ci_support")
    proc = fs.run("--list")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: .ci_support is a symbolic link loop; a folder belongs there; generate it with "
        "`python -m feedstock rerender`"], proc.stderr
    os.unlink(ci)
    ci.write_text("x\n")
    proc = fs.run("--list")
    assert proc.returncode == 2 and "error: .ci_support is a file; a folder belongs there" in proc.stderr
