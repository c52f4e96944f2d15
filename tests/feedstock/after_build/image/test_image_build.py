"""`python -m feedstock image` for real: images of the real PyTorch 2.13.0 CPU packages that
rattler-build built from the feedstock's recipe (the session's `wheelbuild`, shared with
tests/realbuild/test_real_cpu_wheel.py), checked by skopeo, oci-image-tool and podman.

Two builds (the package's `rig`, tests/support/image_rig.py): A (requirements six and
torch==2.13.0) and B (requirements idna, on the base tar A's run cached, given with --base): A and
B share the torch layer, byte for byte. One environment built twice into one manifest digest is
test_build_stage.py's E and E again.
"""
from __future__ import annotations

import gzip
import json
import subprocess
import tarfile

import pytest

pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.container, pytest.mark.image, pytest.mark.download]


def test_the_output_holds_oci_layout_docker_archive_and_apptainer_recipe(rig):
    names = sorted(p.name for p in rig.a.out.iterdir())
    assert names == ["Apptainer.def", "image.json", "image.tar", "oci"], names
    assert list(rig.a.layers) == ["base", "torch", "environment", "requirements"]
    recipe = (rig.a.out / "Apptainer.def").read_text()
    assert "Bootstrap: docker-archive\nFrom: image.tar\n" in recipe and "CONDA_PREFIX=/opt/env" in recipe
    assert not list(rig.work.glob(".*partial*")), "a temp folder was left behind"


def test_skopeo_inspect_and_oci_image_tool_validate(rig):
    for ref in (rig.a.oci, f"docker-archive:{rig.a.out / 'image.tar'}"):
        proc = subprocess.run(["skopeo", "inspect", ref], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        inspected = json.loads(proc.stdout)
        assert len(inspected["Layers"]) == 4
        assert "CONDA_PREFIX=/opt/env" in inspected["Env"]
        assert any(e.startswith("PATH=/opt/env/bin:") for e in inspected["Env"])
        assert inspected["Labels"]["feedstock.torch.version"] == "2.13.0"
    proc = subprocess.run(["oci-image-tool", "validate", "--type", "image",
                           "--ref", f"name={rig.a.info['oci_ref']}", str(rig.a.out / "oci")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "Validation succeeded" in proc.stdout, proc.stdout + proc.stderr


def test_podman_runs_torch_and_pip_sees_it_installed(rig):
    loaded = rig.podman.run("load", "-i", str(rig.a.out / "image.tar"), timeout=900).stdout
    name = rig.a.info["name"]
    assert name == "localhost/pytorch-cpu:2.13.0-py311" and name in loaded, loaded
    code = ("import json, os, torch, six; x = torch.arange(6.0).reshape(2, 3); "
            "print(json.dumps([torch.__version__, torch.__file__, float((x @ x.T).sum()), os.environ['CONDA_PREFIX']]))")
    out = rig.podman.run("run", "--rm", "--network=none", name, "python", "-c", code).stdout
    version, location, total, prefix = json.loads(out.strip().splitlines()[-1])
    assert version.split("+")[0] == "2.13.0" and total == 83.0 and prefix == "/opt/env"
    assert location == "/opt/env/lib/python3.11/site-packages/torch/__init__.py"
    pip = rig.podman.run("run", "--rm", "--network=none", name, "pip", "install", "--no-index",
                         "torch==2.13.0").stdout
    assert "Requirement already satisfied: torch==2.13.0" in pip, pip
    check = rig.podman.run("run", "--rm", "--network=none", name, "python", "-m", "pip", "check").stdout
    assert "No broken requirements found" in check


def test_two_images_with_other_requirements_share_the_torch_layer(rig):
    a, b = rig.a.layers, rig.b.layers
    assert a["torch"] == b["torch"]
    assert a["base"] == b["base"] and a["environment"] == b["environment"]
    assert a["requirements"] != b["requirements"]
    assert rig.a.info["manifest_digest"] != rig.b.info["manifest_digest"]


def test_conda_meta_records_no_host_paths(rig):
    algo, digest = rig.a.layers["torch"].split(":")
    blob = rig.a.out / "oci" / "blobs" / algo / digest
    with tarfile.open(fileobj=gzip.open(blob)) as tar:
        names = tar.getnames()
        records = [json.load(tar.extractfile(n)) for n in names if n.startswith("opt/env/conda-meta/")]
    assert sorted(r["name"] for r in records) == ["libtorch", "pytorch"]
    for record in records:
        assert record.get("extracted_package_dir", "") == "" and record["link"]["source"] == ""
        assert not [f for f in record["files"] if f.startswith("/")]
    assert "opt/env/CACHEDIR.TAG" not in names
    assert any(n.endswith("lib/libtorch_cpu.so") for n in names)
    assert not any("site-packages/six" in n for n in names)


def test_a_channel_without_the_flavours_packages_is_one_line(rig):
    proc = rig.image("--flavour", "gpu")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: channel {rig.channels[0]} has no pytorch-gpu (the gpu flavour's "
                                   "packages); build that flavour into it first")
    assert not (rig.work / "refused").exists() and not list(rig.work.glob(".*partial*"))


def test_requirements_that_would_replace_torch_are_refused_naming_the_line(rig):
    req = rig.work / "req-bad.txt"
    req.write_text("six==1.17.0\ntorch>=2.14\n")
    proc = rig.image("--requirements", str(req), "--find-links", str(rig.wheels), "--base", str(rig.work / "none.tar"))
    assert proc.returncode == 2 and "--base" in proc.stderr  # the base is checked before the solve
    proc = rig.image("--requirements", str(req), "--host-python", str(rig.host_python))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: {req}:2: 'torch>=2.14' would replace the image's torch 2.13.0; "
                                   "drop the line or accept 2.13.0")
    assert not (rig.work / "refused").exists() and not list(rig.work.glob(".*partial*"))
