"""`python -m feedstock image` refuses bad input in one line (exit 2, or 3 for a missing tool)
before anything is written: a base that is neither a rootfs tar nor an OCI layout, a channel
that is not one, a missing umoci/skopeo, an --output that holds something. The refusal of a
channel without the flavour's packages needs a real channel: tests/feedstock/after_build/image/test_image_build.py."""
from __future__ import annotations

import io
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.feedstock_cli import run_feedstock_cli

pytestmark = pytest.mark.skipif(shutil.which("umoci") is None or shutil.which("skopeo") is None,
                                reason="umoci and skopeo not installed (apt-get install umoci skopeo; .ci/run does)")


def image(tmp_path: Path, *extra: str, env: dict | None = None):
    out = tmp_path / "img"
    proc = run_feedstock_cli("image", "--channel", str(tmp_path / "channel"), "--flavour", "cpu",
                             "--python", "3.11", "--output", str(out), *extra, env=env)
    return proc, out


def one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def nothing_written(tmp_path: Path, *kept: str) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def _tar(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"x\n"))
    return path


@pytest.mark.parametrize("make, says", [
    (lambda d: _tar(d / "app.tar", ["app/main.py", "app/etc/conf"]), "a tar without etc/ and usr/ at its top"),
    (lambda d: (d / "notes.txt").write_text("hello\n") and d / "notes.txt", "not a tar"),
    (lambda d: (d / "folder").mkdir() or d / "folder", "a folder but not an OCI layout"),
    (lambda d: d / "missing.tar", "no such file or folder"),
])
def test_a_base_that_is_no_rootfs_or_oci_layout_is_one_line(tmp_path, make, says):
    base = make(tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir())
    proc, out = image(tmp_path, "--base", str(base))
    assert proc.returncode == 2
    assert says in one_line(proc) and f"--base {base}" in proc.stderr
    nothing_written(tmp_path, *kept)


def test_an_oci_layout_without_the_named_image_is_one_line(tmp_path):
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    proc, _ = image(tmp_path, "--base", f"{layout}:app")
    assert proc.returncode == 2 and "no image 'app' in it" in one_line(proc)
    nothing_written(tmp_path, "layout")


def test_a_folder_that_is_no_channel_is_one_line(tmp_path):
    (tmp_path / "channel").mkdir()
    proc, _ = image(tmp_path, "--base", str(_tar(tmp_path / "root.tar", ["etc/os-release", "usr/bin/sh"])))
    assert proc.returncode == 2
    assert "no linux-64/repodata.json or noarch/repodata.json; index it first" in one_line(proc)
    nothing_written(tmp_path, "channel", "root.tar")


def test_missing_umoci_and_skopeo_say_what_to_install(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    proc, _ = image(tmp_path, env={"PATH": str(bin_dir)})
    assert proc.returncode == 3
    assert one_line(proc) == ("error: umoci, skopeo, mmdebstrap not found; install them "
                              "(apt-get install umoci skopeo mmdebstrap)")
    nothing_written(tmp_path, "bin")


def test_an_output_that_holds_something_is_refused(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "keep.txt").write_text("mine\n")
    proc, out = image(tmp_path)
    assert proc.returncode == 2 and "exists and is not empty" in one_line(proc)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_a_corrupt_channel_index_is_one_line(tmp_path):
    """Issue 25: a corrupt repodata.json was a JSONDecodeError traceback."""
    (tmp_path / "channel" / "linux-64").mkdir(parents=True)
    (tmp_path / "channel" / "linux-64" / "repodata.json").write_text('{"packages": {"pytorch-2')
    proc, _ = image(tmp_path, "--base", str(_tar(tmp_path / "root.tar", ["etc/os-release", "usr/bin/sh"])))
    assert proc.returncode == 2
    assert "repodata.json:1: not valid JSON" in one_line(proc)
    nothing_written(tmp_path, "channel", "root.tar")



# --- an environment file (--environment) and the pip steps' inputs ---------------------------

def env_image(tmp_path: Path, text: str, *extra: str):
    (tmp_path / "env.yml").write_bytes(text.encode("latin-1"))
    proc = run_feedstock_cli("image", "--environment", str(tmp_path / "env.yml"), "--output",
                             str(tmp_path / "img"), *extra)
    return proc


ENV = "channels: [{channel}]\ndependencies:\n  - pytorch-cpu\n  - python=3.11\n  - pip:\n{pip}"


@pytest.mark.parametrize("text, says", [
    ("channels: [a, b\ndependencies: [", "env.yml:2: invalid YAML"),
    ("\x00\x01binary", "byte 0x00 (NUL) is not text"),
    ("caf\xe9: [", "not UTF-8 text"),
    ("channels: [build_artifacts]\ndependencies: [python=3.11, pip]\n",
     "no pytorch-cpu, pytorch-gpu or pytorch-rocm among the dependencies"),
])
def test_an_environment_file_that_is_no_image_definition_is_one_line(tmp_path, text, says):
    proc = env_image(tmp_path, text)
    assert proc.returncode == 2 and says in one_line(proc)
    nothing_written(tmp_path, "env.yml")


def test_a_git_url_with_find_links_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "channel").mkdir()
    pip = "    - einops==0.8.2\n    - scatter @ git+https://github.com/rusty1s/pytorch_scatter.git@2.1.2\n"
    proc = env_image(tmp_path, ENV.format(channel=tmp_path / "channel", pip=pip), "--find-links", str(tmp_path / "wheels"))
    assert proc.returncode == 2
    assert one_line(proc).startswith(f"error: {tmp_path / 'env.yml'}:7: 'scatter @ git+https://github.com/rusty1s/"
                                     "pytorch_scatter.git@2.1.2' needs the network, and with --find-links pip runs "
                                     "without one")
    nothing_written(tmp_path, "env.yml", "wheels", "channel")


@pytest.mark.skipif(shutil.which("podman") is None or shutil.which("mmdebstrap") is None,
                    reason="podman and mmdebstrap not installed (the pip steps and the build stage need them)")
def test_a_git_url_whose_host_cannot_be_reached_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "channel").mkdir()
    pip = "    - scatter @ git+https://git.example.invalid/scatter.git@2.1.2 --no-build-isolation\n"
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("https_proxy", "http_proxy", "pip_proxy")}
    (tmp_path / "env.yml").write_text(ENV.format(channel=tmp_path / "channel", pip=pip))
    proc = run_feedstock_cli("image", "--environment", str(tmp_path / "env.yml"), "--output", str(tmp_path / "img"),
                             env=env)
    assert proc.returncode == 3
    assert "needs git.example.invalid:443, which this machine cannot reach (does not resolve)" in one_line(proc)
    nothing_written(tmp_path, "env.yml", "channel")


@pytest.mark.parametrize("extra, says", [
    (("--channel", "elsewhere"), "names the channels, the flavour and the pip lines; drop --channel"),
    (("--python", "3.12"), "--python 3.12, but"),
    (("--pip-cert", "{tmp}/nowhere.pem"), "--pip-cert {tmp}/nowhere.pem: no such file"),
    (("--pip-cert", "{tmp}/env.yml"), "not a PEM certificate bundle"),
])
def test_options_that_clash_with_the_environment_file_are_one_line(tmp_path, extra, says):
    (tmp_path / "channel").mkdir()
    extra = tuple(arg.replace("{tmp}", str(tmp_path)) for arg in extra)
    proc = env_image(tmp_path, ENV.format(channel=tmp_path / "channel", pip="    - einops\n"), *extra)
    assert proc.returncode == 2 and says.replace("{tmp}", str(tmp_path)) in one_line(proc)
    nothing_written(tmp_path, "env.yml", "channel")
