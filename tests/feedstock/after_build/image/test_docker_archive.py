"""oci.write_docker_archive: `docker save`'s format from the build's uncompressed layer tars,
without gunzipping the layout's blobs again. Loaded for real by podman (test_image_build.py,
test_build_stage.py) and inspected by skopeo; here its shape and its refusals."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from feedstock.after_build.image.oci import write_docker_archive
from feedstock.errors import FeedstockError


def _layer(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _config(*layers: Path) -> bytes:
    diff_ids = [f"sha256:{hashlib.sha256(p.read_bytes()).hexdigest()}" for p in layers]
    return json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["A=1"]},
                       "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()


def test_the_archive_holds_the_config_the_layers_in_order_and_the_manifest(tmp_path):
    base = _layer(tmp_path / "base.tar", {"etc/os-release": b"debian\n"})
    torch = _layer(tmp_path / "torch.tar", {"opt/env/lib/libtorch.so": b"\x7fELF"})
    config = _config(base, torch)
    write_docker_archive(tmp_path / "image.tar", "localhost/x:1", config, [base, torch], 1700000000)
    with tarfile.open(tmp_path / "image.tar") as archive:
        names = archive.getnames()
        manifest = json.loads(archive.extractfile("manifest.json").read())
        [entry] = manifest
        assert archive.extractfile(entry["Config"]).read() == config
        assert entry["Config"] == hashlib.sha256(config).hexdigest() + ".json"
        assert entry["RepoTags"] == ["localhost/x:1"]
        assert [archive.extractfile(n).read() for n in entry["Layers"]] == [base.read_bytes(), torch.read_bytes()]
        assert {m.mtime for m in archive.getmembers()} == {1700000000}
    assert names[-1] == "manifest.json"
    # the same inputs, the same bytes
    write_docker_archive(tmp_path / "again.tar", "localhost/x:1", config, [base, torch], 1700000000)
    assert (tmp_path / "again.tar").read_bytes() == (tmp_path / "image.tar").read_bytes()


def test_a_tar_that_is_not_the_configs_layer_is_refused(tmp_path):
    base = _layer(tmp_path / "base.tar", {"a": b"1"})
    other = _layer(tmp_path / "other.tar", {"b": b"2"})
    with pytest.raises(FeedstockError, match="other.tar is not the layer the image config names"):
        write_docker_archive(tmp_path / "image.tar", "x:1", _config(base, base), [base, other], 0)
    with pytest.raises(FeedstockError, match="lists 1 layers, the build has 2 tars"):
        write_docker_archive(tmp_path / "image2.tar", "x:1", _config(base), [base, other], 0)
