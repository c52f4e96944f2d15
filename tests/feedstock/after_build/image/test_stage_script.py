"""feedstock/after_build/image/stage_script.py (the build stage's driver) and how build_stage.py
reads its output, without a container: unpacking at a fixed path, the per-requirement options
pip wheel gets, the one line a failed build becomes."""
from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from feedstock.after_build.image import stage_script
from feedstock.after_build.image.build_stage import _failure
from feedstock.after_build.image.requirements import BuildItem


def _tar(path, names):
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    return path


def test_an_sdist_unpacks_to_its_one_top_folder(tmp_path):
    archive = _tar(tmp_path / "torch_scatter-2.1.2.tar.gz", ["torch_scatter-2.1.2/setup.py", "torch_scatter-2.1.2/csrc/a.cpp"])
    assert stage_script.unpack(archive, tmp_path / "src") == tmp_path / "src" / "torch_scatter-2.1.2"
    assert (tmp_path / "src" / "torch_scatter-2.1.2" / "csrc" / "a.cpp").read_bytes() == b"x"
    with zipfile.ZipFile(tmp_path / "apex-25.9.zip", "w") as zf:
        zf.writestr("apex-25.9/setup.py", "x")
    assert stage_script.unpack(tmp_path / "apex-25.9.zip", tmp_path / "zsrc") == tmp_path / "zsrc" / "apex-25.9"
    two = _tar(tmp_path / "two.tar.gz", ["a/setup.py", "b/setup.py"])
    assert stage_script.unpack(two, tmp_path / "two") is None


@pytest.mark.parametrize("requirement, options", [
    ("torch-scatter==2.1.2", []),
    ("flash-attn==2.8.3 --config-settings=--build-option=--cpp_ext --hash=sha256:abc",
     ["--config-settings=--build-option=--cpp_ext"]),
    ("apex @ git+https://github.com/NVIDIA/apex -C build-option=--cuda_ext", ["-C", "build-option=--cuda_ext"]),
])
def test_pip_wheel_gets_the_per_requirement_build_options_but_not_the_hash(requirement, options):
    assert stage_script.wheel_options(requirement) == options


def test_a_failed_build_is_its_line_and_the_first_compiler_error():
    items = [BuildItem("env.yml:10", "einops==0.8.2", True), BuildItem("env.yml:11", "broken-ext==0.1", False)]
    stdout = ("::item 0\nSaved ./einops.whl\n::item 1\n  error: subprocess-exited-with-error\n"
              "  FAILED: /build/src/broken_ext-0.1/build/temp/broken.o\n"
              "  /build/src/broken_ext-0.1/broken.cpp:2:27: error: 'undeclared_name' was not declared in this scope\n")
    line = _failure(items, stdout, "::failed 1\n")
    assert line == ("env.yml:11: building 'broken-ext==0.1' in the build stage failed: "
                    "/build/src/broken_ext-0.1/broken.cpp:2:27: error: 'undeclared_name' was not declared in this scope")
    assert _failure(items, "", "Error: crun: cannot start\n") == "the build stage failed: Error: crun: cannot start"


def test_the_wheel_cache_key_follows_every_input(tmp_path):
    sdist = _tar(tmp_path / "torch_scatter-2.1.2.tar.gz", ["torch_scatter-2.1.2/setup.py"])
    key = stage_script.cache_key("ctx", sdist, "torch-scatter==2.1.2", False)
    assert key == stage_script.cache_key("ctx", sdist, "torch-scatter==2.1.2 --hash=sha256:ab", False)
    other = _tar(tmp_path / "other.tar.gz", ["torch_scatter-2.1.2/setup.py", "torch_scatter-2.1.2/x.cpp"])
    assert len({key, stage_script.cache_key("ctx2", sdist, "torch-scatter==2.1.2", False),
                stage_script.cache_key("ctx", other, "torch-scatter==2.1.2", False),
                stage_script.cache_key("ctx", sdist, "torch-scatter==2.1.2 -C a=b", False),
                stage_script.cache_key("ctx", sdist, "torch-scatter==2.1.2", True)}) == 5


def test_a_wheel_is_stored_whole_and_copied_back(tmp_path, monkeypatch):
    monkeypatch.setattr(stage_script, "CACHE", tmp_path / "cache")
    built = tmp_path / "built"
    built.mkdir()
    (built / "a-1-py3-none-any.whl").write_bytes(b"wheel")
    stage_script.store("k1", [built / "a-1-py3-none-any.whl"])
    assert not (tmp_path / "cache").exists()          # no cache mounted: nothing stored
    (tmp_path / "cache").mkdir()
    stage_script.store("k1", [built / "a-1-py3-none-any.whl"])
    stage_script.store("k1", [built / "a-1-py3-none-any.whl"])   # stored already: kept, no partial left
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["k1"]
    out = tmp_path / "out"
    out.mkdir()
    assert stage_script.from_cache("k1", out) == ["a-1-py3-none-any.whl"]
    assert (out / "a-1-py3-none-any.whl").read_bytes() == b"wheel"
    assert stage_script.from_cache("k2", out) == []


def test_the_stage_is_followed_line_by_line_with_the_file_being_compiled(monkeypatch):
    import sys

    from feedstock.after_build.image import build_stage

    monkeypatch.setattr(build_stage, "HEARTBEAT", 0.5)
    script = ("import sys, time\nprint('build stage: building x==1 from x-1.tar.gz', flush=True)\n"
              "print('g++ -O2 -c csrc/scatter_cpu.cpp -o build/scatter_cpu.o', flush=True)\ntime.sleep(1.6)\n"
              "print('error: boom', file=sys.stderr)\nsys.exit(3)\n")
    said: list[str] = []
    code, out, err = build_stage._follow([sys.executable, "-c", script], said.append)
    assert code == 3 and "scatter_cpu.cpp" in out and err == "error: boom\n"
    assert said[0] == "image: build stage: building x==1 from x-1.tar.gz"
    assert "image: build stage: still building (0 min; compiling scatter_cpu.cpp)" in said[1:]


def test_an_interrupted_stage_takes_its_container_with_it(tmp_path):
    import os
    import sys

    from feedstock.after_build.image import build_stage

    pid_file = tmp_path / "pid"
    script = (f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
              "print('build stage: building x==1 from x-1.tar.gz', flush=True)\ntime.sleep(60)\n")

    def interrupt(line: str) -> None:
        raise KeyboardInterrupt   # Ctrl-C, or SIGTERM through the CLI's handler

    with pytest.raises(KeyboardInterrupt):
        build_stage._follow([sys.executable, "-c", script], interrupt)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_sigterm_is_an_interruption_of_the_command(tmp_path):
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT

    code = ("import os, signal, sys, time\nimport feedstock.after_build.image.build as b\nimport feedstock.cli as cli\n"
            "b.build = lambda *a, **k: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(30))\n"
            "sys.exit(cli.main(['image', '--output', sys.argv[1], '--channel', 'c', '--flavour', 'cpu', "
            "'--python', '3.11']))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130 and proc.stderr == "error: python -m feedstock image interrupted\n", proc.stderr


def test_a_pure_python_wheel_is_not_counted_as_built_against_torch():
    from feedstock.after_build.image.build_stage import wheel_kinds

    wheels = [Path("torch_cluster-1.6.3-cp311-cp311-linux_x86_64.whl"), Path("einops-0.8.2-py3-none-any.whl")]
    assert wheel_kinds(wheels) == "1 wheel(s) with compiled code, 1 pure Python (nothing compiled)"
    assert wheel_kinds(wheels[:1]) == "1 wheel(s) with compiled code"


@pytest.mark.compile
def test_the_wheel_build_shows_its_compiler_lines_for_the_heartbeat(tmp_path):
    """Real pip and gcc: the arguments the stage gives pip wheel make the compiler's command
    lines reach the output that the host follows, so its heartbeat can name the file."""
    import os
    import shutil
    import subprocess
    import sys

    from feedstock.after_build.image.build_stage import COMPILED

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    source = tmp_path / "tiny_c-0.1"
    source.mkdir()
    (source / "setup.py").write_text("from setuptools import Extension, setup\n"
                                     "setup(name='tiny-c', version='0.1', ext_modules=[Extension('tiny_c', ['tiny.c'])])\n")
    (source / "tiny.c").write_text("#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"tiny_c\"};\n"
                                   "PyMODINIT_FUNC PyInit_tiny_c(void) { return PyModule_Create(&m); }\n")
    arguments = stage_script.wheel_arguments(["--no-build-isolation"], ["--no-index"], tmp_path / "wheels",
                                             source, "tiny-c==0.1")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    proc = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir", *arguments],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert [found.group(1) for found in COMPILED.finditer(proc.stdout)] == ["tiny.c"], proc.stdout[-2000:]


def test_a_stage_that_wrote_its_done_file_is_trusted_over_a_lost_exit_code(tmp_path):
    """podman may lose a finished container's exit code; the stage's done.json and its wheels
    say it finished. Anything less is the failure it looks like."""
    import json

    from feedstock.after_build.image.build_stage import finished_anyway

    (tmp_path / "wheels").mkdir()
    assert not finished_anyway(tmp_path, "")                                   # no done.json
    (tmp_path / "done.json").write_text(json.dumps({"wheels": ["a-1-cp311-cp311-linux_x86_64.whl"]}))
    assert not finished_anyway(tmp_path, "")                                   # the wheel is missing
    (tmp_path / "wheels" / "a-1-cp311-cp311-linux_x86_64.whl").write_bytes(b"wheel")
    assert finished_anyway(tmp_path, "Error: no such exit code (container in state running)\n")
    assert not finished_anyway(tmp_path, "::failed 0\n")                       # an item failed
    (tmp_path / "done.json").write_text("{not json")
    assert not finished_anyway(tmp_path, "")
