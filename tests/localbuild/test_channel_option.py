"""--channel: given channels instead of the config's channel_sources, in the plan, the derived
config and the engine's mounts; bad folders are one line (fake engine)."""
from __future__ import annotations

import json

from tests.support.build_locally import make_feedstock, option_values

CONFIG = "linux_64_blas_implgenericcuda_compiler_versionNone"


def _channel(path):
    (path / "noarch").mkdir(parents=True)
    (path / "noarch" / "repodata.json").write_text(json.dumps({"packages": {}}))
    return path


def test_local_and_url_channels_replace_channel_sources(tmp_path):
    fs = make_feedstock(tmp_path, {CONFIG: dict(blas="generic", channels="conda-forge/label/rc,conda-forge")})
    local = _channel(tmp_path / "site channel")
    mirror = "https://mirror.example.org/conda-forge"
    dry = fs.run(CONFIG, "--channel", str(local), "--channel", mirror, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"channels:     {local},{mirror} (--channel" in dry.stdout
    assert not fs.artifacts.exists()  # the dry run writes nothing
    proc = fs.run(CONFIG, "--channel", str(local), "--channel", mirror, "--min-free-gb", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = fs.runs()
    env = option_values(run["argv"], "-e")
    assert f"CHANNEL_SOURCES={local},{mirror}" in env
    # the local folder at its own path, read-only; the config's copy names both channels
    assert f"{local}:{local}:ro,z" in option_values(run["argv"], "-v")
    derived = fs.artifacts / "localbuild" / f"{CONFIG}.yaml"
    assert f"CONFIG_FILE=/home/conda/feedstock_root/build_artifacts/localbuild/{CONFIG}.yaml" in env
    text = derived.read_text()
    assert f'channel_sources:\n- "{local},{mirror}"\n' in text and "label/rc" not in text
    original = (fs.root / ".ci_support" / f"{CONFIG}.yaml").read_text()
    assert text.replace(f'- "{local},{mirror}"', "- conda-forge/label/rc,conda-forge") == original


def test_a_folder_that_is_not_a_channel_is_one_line(tmp_path):
    fs = make_feedstock(tmp_path, {CONFIG: dict(blas="generic")})
    (tmp_path / "empty").mkdir()
    for value, expected in ((str(tmp_path / "missing"), "does not exist"),
                            (str(tmp_path / "empty"), "not an indexed channel")):
        proc = fs.run(CONFIG, "--channel", value, "--dry-run")
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], lines
    assert not fs.artifacts.exists()


def test_a_file_url_is_decoded_and_a_control_character_refused(tmp_path):
    """Issue 35: Path.as_uri()'s `%20` was refused as "no such folder"; a newline in a folder's
    path was accepted, mounted, then cut at the newline by the build script."""
    fs = make_feedstock(tmp_path, {CONFIG: dict(blas="generic")})
    local = _channel(tmp_path / "site channel")
    dry = fs.run(CONFIG, "--channel", local.as_uri(), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"channels:     {local} (--channel" in dry.stdout
    odd = _channel(tmp_path / "odd\nname")
    proc = fs.run(CONFIG, "--channel", str(odd), "--dry-run")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line == (f"error: --channel {str(odd)!r}: has a control character ('\\n'); give a channel name, "
                    "a URL or a folder whose path has none")
    assert not fs.artifacts.exists()
