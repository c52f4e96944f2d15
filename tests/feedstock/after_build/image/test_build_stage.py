"""`python -m feedstock image --environment` for real (issue 27): an environment file naming our
channel's pytorch-cpu (the real 2.13.0 CPU packages of the package's `rig`), einops, and the
torch-scatter 2.1.2 sdist marked --no-build-isolation in its pip: section, all from a local folder
(--find-links: no network in the containers).

Two builds of that file (E and E again): torch-scatter is compiled by g++ in the build stage
against the image's own torch (once: E again takes the wheel from the build stage's wheel cache,
keyed by the sdist's sha256, the image's conda packages and the build base; the module's own
cache, so E compiles on every run, each file through the build base's ccache, whose machine-wide
folder serves the objects when the same sources met the same torch before), only its wheel
enters the image. Checked with podman: the
extension's results equal plain torch's, it loads the image's libtorch, pip check is clean, there
is no gcc or g++ in the runtime image, the torch layer is the one of rig's image A (no
extension), and both builds have one manifest digest. A certificate bundle and an index URL
given to the pip steps appear in no layer. Refused in one line, leaving nothing: an extension that
does not compile (its first compiler error line), a python that cannot start in the image (the
missing library named, before the pip step), a pip: line that would replace torch, a conda
dependency asking for another pytorch.

The sdist and the wheel come from PyPI once, into the downstream command's cache (keyed by
their sha256, recipe/dependents.yaml).
"""
from __future__ import annotations

import gzip
import json
import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.compile_counts import build_stage_compiles
from tests.support.image_rig import Image, Rig
from tests.support.paths import REPO_ROOT
from tests.support.scratch import module_scratch
from tests.support.sdist import write_sdist

pytest.importorskip("rattler", reason="py-rattler (requirements-dev.txt) is not installed")

pytestmark = [pytest.mark.compile, pytest.mark.packages, pytest.mark.container, pytest.mark.image, pytest.mark.download]

MARKER_INDEX = "https://marker-index.invalid/simple"
CERT_MARKER = "feedstock-test-ca-marker"
PEM = f"# {CERT_MARKER}\n-----BEGIN CERTIFICATE-----\nMIIBfeedstock\n-----END CERTIFICATE-----\n"

ENV = """\
name: scatter-app
channels:
  - {channel}
  - {toolchain}
dependencies:
  - pytorch-cpu
  - python=3.11
  - pip
  - pip:
{pip}"""
SCATTER = "    - einops==0.8.2\n    - torch-scatter==2.1.2 --no-build-isolation\n"

BROKEN_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="broken-ext", version="0.1", ext_modules=[CppExtension("broken_ext._C", ["broken.cpp"])],
      cmdclass={"build_ext": BuildExtension})
"""
# no torch header: g++ reaches the error at once instead of after a minute of torch/extension.h
BROKEN_CPP = "// built by torch's BuildExtension all the same\nint answer() { return undeclared_name; }\n"

CHECK = """\
import json, torch, torch_scatter
src = torch.tensor([[2., 0, 1, 4, 3], [0, 2, 1, 3, 4]])
index = torch.tensor([[4, 5, 4, 2, 3], [0, 0, 2, 2, 1]])
total = torch_scatter.scatter_sum(src, index, dim=-1, dim_size=6)
largest, _ = torch_scatter.scatter_max(src, index, dim=-1, dim_size=6)
ref_total = torch.zeros(2, 6).scatter_add_(-1, index, src)
ref_largest = torch.zeros(2, 6).scatter_reduce(-1, index, src, reduce="amax", include_self=False)
maps = [line.split()[-1] for line in open("/proc/self/maps") if "libtorch_cpu.so" in line]
print(json.dumps({"sum": total.tolist(), "sum_equal": torch.equal(total, ref_total),
                  "max": largest.tolist(), "max_equal": torch.equal(largest, ref_largest),
                  "scatter": torch_scatter.__file__, "libtorch": sorted(set(maps))}))
"""


@dataclass
class Stage:
    rig: Rig
    work: Path
    links: Path
    env_args: dict
    e: Image
    e_again: Image


def _env_file(stage_work: Path, rig: Rig, name: str, pip: str, extra_deps: str = "") -> Path:
    path = stage_work / name
    text = ENV.format(channel=rig.channels[0], toolchain=rig.channels[1], pip=pip)
    if extra_deps:
        text = text.replace("  - pip\n", f"  - pip\n{extra_deps}")
    path.write_text(text)
    return path


def _build(rig: Rig, env_file: Path, output: Path, links: Path, *extra: str, env: dict | None = None) -> Image:
    started = time.monotonic()
    proc = rig.command("--environment", str(env_file), "--find-links", str(links), *extra, output=output, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    image = Image(output, json.loads((output / "image.json").read_text()), time.monotonic() - started)
    image.info["stdout"] = proc.stdout
    return image


@pytest.fixture(scope="module")
def stage(request: pytest.FixtureRequest, rig: Rig, tmp_path_factory: pytest.TempPathFactory) -> Stage:
    from feedstock.dependents_catalog import load_catalog
    from feedstock.after_build.downstream.sources import default_cache, fetch

    from dataclasses import replace

    from tests.support.podman import private_podman

    work = module_scratch(request, tmp_path_factory, "build-stage")
    # a podman store of its own: the rig's store is used by test_image_build.py, maybe on the other
    # worker at the same time, and podman then loses a container's exit code ("no such exit code")
    rig = replace(rig, podman=private_podman(work / "podman"))
    links = work / "links"
    links.mkdir()
    catalog = {d.name: d for d in load_catalog(REPO_ROOT / "recipe" / "dependents.yaml")}
    for name in ("torch-scatter", "einops"):
        shutil.copy2(fetch(catalog[name].source, default_cache()), links)
    write_sdist(links / "broken_ext-0.1.tar.gz", "broken_ext-0.1", {"setup.py": BROKEN_SETUP, "broken.cpp": BROKEN_CPP})
    (work / "site-ca.pem").write_text(PEM)
    env_args = {"PIP_INDEX_URL": MARKER_INDEX}
    env_file = _env_file(work, rig, "env.yml", SCATTER)
    # a name of its own: rig's image A is loaded into the same podman store
    # a wheel cache of the module's own: the packages are the machine's (the same inputs, the same
    # files), so a lasting cache would serve E's wheel and nothing would compile
    common = ("--host-python", str(rig.host_python), "--pip-cert", str(work / "site-ca.pem"),
              "--name", "localhost/scatter-app:1", "--wheel-cache", str(work / "wheel-cache"))
    e = _build(rig, env_file, work / "e", links, *common, env=env_args)
    e_again = _build(rig, env_file, work / "e-again", links, *common, env=env_args)
    print(f"image builds with the build stage: {e.seconds:.0f}s, {e_again.seconds:.0f}s")
    return Stage(rig, work, links, env_args, e, e_again)


def _run(stage: Stage, *args: str) -> str:
    return stage.rig.podman.run("run", "--rm", "--network=none", stage.e.info["name"], *args, timeout=600).stdout


@pytest.fixture(scope="module")
def loaded(stage: Stage) -> str:
    out = stage.rig.podman.run("load", "-i", str(stage.e.out / "image.tar"), timeout=900).stdout
    assert stage.e.info["name"] in out, out
    return stage.e.info["name"]


def test_torch_scatter_compiled_in_the_build_stage_gives_torchs_results(stage, loaded):
    result = json.loads(_run(stage, "python", "-c", CHECK).strip().splitlines()[-1])
    assert result["sum"] == [[0.0, 0.0, 4.0, 3.0, 3.0, 0.0], [2.0, 4.0, 4.0, 0.0, 0.0, 0.0]]
    assert result["max"] == [[0.0, 0.0, 4.0, 3.0, 2.0, 0.0], [2.0, 4.0, 3.0, 0.0, 0.0, 0.0]]
    assert result["sum_equal"] and result["max_equal"], result
    assert result["scatter"] == "/opt/env/lib/python3.11/site-packages/torch_scatter/__init__.py"
    assert result["libtorch"] == ["/opt/env/lib/libtorch_cpu.so"], result  # the image's own torch
    assert "image: build stage: 1 package(s) to build against the image's torch" in stage.e.info["stdout"]
    assert "image: build stage: 1 wheel(s) with compiled code\n" in stage.e.info["stdout"]
    # g++ ran for each translation unit, through the build base's ccache (a machine that compiled
    # the same sources against the same torch before serves the objects from it)
    [compiled] = build_stage_compiles(stage.e.info["stdout"])
    assert compiled >= 4, stage.e.info["stdout"][-3000:]


def test_pip_check_is_clean_and_the_runtime_image_has_no_compiler(stage, loaded):
    assert "No broken requirements found" in _run(stage, "python", "-m", "pip", "check")
    found = _run(stage, "sh", "-c", "for c in gcc g++ cc c++ x86_64-linux-gnu-gcc; do command -v $c; done; "
                                    "ls /usr/bin | grep -E 'gcc|g\\+\\+' ; echo done")
    assert found.strip() == "done", found
    listed = _run(stage, "python", "-m", "pip", "list", "--format=json")
    names = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(listed)}
    assert names["torch-scatter"] == "2.1.2" and names["einops"] == "0.8.2" and names["torch"].startswith("2.13.0")
    # the build stage's wheel came from a mount that only the build had: freeze names no path of it
    frozen = _run(stage, "python", "-m", "pip", "freeze").splitlines()
    assert {"torch-scatter==2.1.2", "torch_scatter==2.1.2"} & set(frozen), frozen
    assert not [line for line in frozen if "/pip-wheels/" in line], frozen


def test_only_the_wheel_entered_the_image_and_torch_kept_its_layer(stage):
    e, a = stage.e.layers, stage.rig.a.layers
    assert list(e) == ["base", "torch", "environment", "requirements"]
    assert e["torch"] == a["torch"] and e["base"] == a["base"]   # the same image without the extension
    algo, digest = e["requirements"].split(":")
    with tarfile.open(fileobj=gzip.open(stage.e.out / "oci" / "blobs" / algo / digest)) as tar:
        names = tar.getnames()
    assert any(n.endswith("torch_scatter/_scatter_cpu.so") for n in names)
    assert not [n for n in names if n.endswith((".cpp", ".o", ".ninja")) or "/build/" in n], names[:20]
    assert not [n for n in names if "/torch/" in n or "torch-2.13" in n]


def test_two_builds_of_the_environment_file_have_one_manifest_digest(stage):
    assert stage.e.info["manifest_digest"] == stage.e_again.info["manifest_digest"]
    assert stage.e.layers == stage.e_again.layers
    said = [line for line in stage.e_again.info["stdout"].splitlines() if "torch-scatter==2.1.2:" in line]
    assert said and "torch_scatter-2.1.2-" in said[0] and "from the wheel cache (" in said[0], said
    assert "image: build stage: building" not in stage.e_again.info["stdout"]   # nothing compiled again
    assert build_stage_compiles(stage.e_again.info["stdout"]) == []


def test_the_certificate_and_index_reach_pip_but_no_layer(stage):
    assert "image: build stage: pip gets PIP_CERT (a readable file), PIP_INDEX_URL" in stage.e.info["stdout"]
    blobs = stage.e.out / "oci" / "blobs" / "sha256"
    for blob in blobs.iterdir():
        data = blob.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        assert CERT_MARKER.encode() not in data and b"marker-index" not in data and b"pip-cert" not in data, blob.name


def test_an_extension_that_does_not_compile_is_its_first_compiler_error(stage):
    env_file = _env_file(stage.work, stage.rig, "broken.yml", "    - broken-ext==0.1 --no-build-isolation\n")
    proc = stage.rig.command("--environment", str(env_file), "--find-links", str(stage.links),
                             "--host-python", str(stage.rig.host_python), output=stage.work / "broken")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"error: {env_file}:10: building 'broken-ext==0.1' in the build stage failed: ")
    said = lines[0].replace("\u2018", "'").replace("\u2019", "'")   # g++ quotes typographically in a UTF-8 locale
    assert "broken.cpp:2:" in said and "error: 'undeclared_name' was not declared in this scope" in said
    assert not (stage.work / "broken").exists() and not list(stage.work.glob(".*partial*"))


def test_a_python_that_cannot_start_in_the_image_is_named_before_the_pip_step(stage, tmp_path):
    from feedstock.after_build.image.base import debian_base, _python_home

    home = str(_python_home(stage.rig.host_python)).lstrip("/")
    bare = tmp_path / "bare.tar"   # the base of the images, without this machine's CPython
    with tarfile.open(debian_base([stage.rig.host_python]).path) as src, tarfile.open(bare, "w") as dst:
        for member in src:
            if not (member.name.lstrip("./") + "/").startswith(home + "/"):
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    env_file = _env_file(stage.work, stage.rig, "nopython.yml", "    - einops==0.8.2\n")
    proc = stage.rig.command("--environment", str(env_file), "--find-links", str(stage.links), "--base", str(bare),
                             output=stage.work / "nopython")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("error: the environment's python does not run in the image: "
                               "libpython3.11.so.1.0 is in neither the environment nor the base")
    assert "pip install" not in proc.stdout   # refused before the pip step
    assert not (stage.work / "nopython").exists() and not list(stage.work.glob(".*partial*"))


@pytest.mark.parametrize("pip, deps, says", [
    ("    - einops==0.8.2\n    - torch>=2.14\n", "", "{env}:11: 'torch>=2.14' would replace the image's torch 2.13.0"),
    ("    - einops==0.8.2\n", "  - pytorch >=2.14\n", "{env}:9: 'pytorch >=2.14' would replace our channel's pytorch 2.13.0"),
])
def test_a_line_that_would_replace_torch_is_refused_naming_it(stage, pip, deps, says):
    env_file = _env_file(stage.work, stage.rig, "replace.yml", pip, deps)
    proc = stage.rig.command("--environment", str(env_file), "--find-links", str(stage.links),
                             "--host-python", str(stage.rig.host_python), output=stage.work / "replace")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("error: " + says.format(env=env_file))
    assert not (stage.work / "replace").exists() and not list(stage.work.glob(".*partial*"))
