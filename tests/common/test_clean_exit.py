"""Commands that load py-rattler end without dying at exit (common/clean_exit.py, issue 48 part 4).

The fast tests check the exit itself in real interpreters: its status, what atexit and the
buffered streams get, and the usual exit where no Rust runtime is loaded. The `packages` test
runs each py-rattler command's failing path 50 times under load (busy loops, four runs at a
time) and counts deaths by a signal: before the fix, 5 of 80 `image` runs, 20 of 80 develop
environments and 3 of 60 downstream runs died of SIGSEGV or SIGABRT after their error line."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

RUNS = 50
AT_ONCE = 4
BUSY_LOOPS = 3
CPU_CONFIG = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNonegpu_backendcpurocm_versionNone"


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)


def test_with_a_runtime_loaded_atexit_runs_streams_flush_and_the_status_is_kept():
    proc = run_python("""
        import atexit, sys, types
        sys.modules["rattler"] = types.ModuleType("rattler")   # what finish() looks for
        from common.clean_exit import run_command
        atexit.register(lambda: print("atexit ran", flush=True))
        def main():
            sys.stdout.write("buffered line\\n")               # not flushed yet
            print("error: the one line", file=sys.stderr)
            return 2
        run_command(main)
        print("never reached")
    """)
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == ["buffered line", "atexit ran"]
    assert proc.stderr == "error: the one line\n"


@pytest.mark.parametrize("raised, status, text", [
    ("SystemExit(4)", 4, ""), ("SystemExit('error: a message')", 1, "error: a message\n"),
    ("SystemExit(None)", 0, ""), ("RuntimeError('boom')", 1, "RuntimeError: boom"),
    ("KeyboardInterrupt()", 130, "KeyboardInterrupt")])
def test_with_a_runtime_loaded_a_raised_exit_or_exception_keeps_its_meaning(raised, status, text):
    proc = run_python(f"""
        import sys, types
        sys.modules["rattler_build"] = types.ModuleType("rattler_build")
        from common.clean_exit import run_command
        def main():
            raise {raised}
        run_command(main)
    """)
    assert proc.returncode == status
    assert text in proc.stderr


def test_without_a_runtime_the_usual_exit_runs():
    proc = run_python("""
        import sys
        from common.clean_exit import run_command
        class Last:
            def __del__(self):   # finalization runs: the interpreter exits as usual
                print("finalized", flush=True)
        keep = Last()
        run_command(lambda: 3)
    """)
    assert (proc.returncode, proc.stdout) == (3, "finalized\n")


# -- the real commands, under load --------------------------------------------------------------

def _channel_with_empty_index(folder: Path) -> Path:
    for subdir in ("linux-64", "noarch"):
        (folder / subdir).mkdir(parents=True)
        (folder / subdir / "repodata.json").write_text(
            '{"info": {"subdir": "%s"}, "packages": {}, "packages.conda": {}}' % subdir)
    return folder


def _unsolvable_torch_channel(folder: Path) -> Path:
    """A channel with one `pytorch` whose python is nowhere: downstream finds it, the solve of
    its environment fails."""
    recipe = folder / "recipe" / "recipe.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(textwrap.dedent("""\
        package: {name: pytorch, version: "2.13.0"}
        build: {string: cpu_generic_py311_h0123456_0}
        requirements:
          run: ["python 3.11.*"]
    """))
    out = folder / "channel"
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "localbuild/in_container/rattler_build_py.py"), "build",
                           "--recipe", str(recipe), "--output-dir", str(out), "-c", str(folder / "empty")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for scratch in ("bld", "src_cache", "test"):
        shutil.rmtree(out / scratch, ignore_errors=True)
    return out


@pytest.fixture(scope="module")
def failing_commands(tmp_path_factory) -> dict[str, tuple[list[str], dict[str, str], int, str]]:
    """name: (argv, extra environment, exit status, start of the last stderr line); {run} in an
    argument or a value is the run's number: each run has folders of its own."""
    pytest.importorskip("rattler")
    pytest.importorskip("rattler_build")
    base = tmp_path_factory.mktemp("clean-exit")
    empty = _channel_with_empty_index(base / "empty")
    torch = _unsolvable_torch_channel(base)
    catalog = base / "dependents.yaml"
    catalog.write_text(textwrap.dedent("""\
        dependents:
          - {name: somewheel, version: 1.0.0, kind: pip-wheel, flavour: any, torch: "2.13.*",
             imports: [somewheel], tests: {pyargs: [somewheel]}, channel: false}
    """))
    shutil.copytree(torch, base / "index-template")
    develop = {"DEVELOP_SOURCE": str(base / "src"), "DEVELOP_DIR": str(base / "develop-{run}"),
               "RECIPE_ROOT": str(REPO_ROOT / "recipe"), "CHANNEL_SOURCES": str(empty),
               "CONFIG_FILE": str(REPO_ROOT / ".ci_support" / f"{CPU_CONFIG}.yaml"),
               "DEVELOP_PYTHON": "3.12", "LOCALBUILD_NATIVE": "1"}
    return {
        "image": ([sys.executable, "-m", "feedstock", "image", "--channel", empty.as_uri(), "--flavour", "cpu",
                   "--python", "3.11", "--output", str(base / "image-{run}")], {}, 2, "error: cannot solve pytorch-cpu"),
        "downstream": ([sys.executable, "-m", "feedstock", "downstream", "--catalog", str(catalog), "--channel",
                        str(torch), "--work", str(base / "downstream-{run}")], {}, 1, "error: somewheel: cannot solve"),
        "develop": ([sys.executable, str(REPO_ROOT / "localbuild/in_container/develop.py")], develop, 2,
                    "develop: error: the environment cannot be solved"),
        # the toolchain's indexer (tests/support/toolchain.py, downstream's channel view)
        "index": ([sys.executable, str(REPO_ROOT / "localbuild/in_container/rattler_build_py.py"), "index",
                   str(base / "index-{run}")], {}, 0, ""),
    }


def _busy_loops(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


@pytest.mark.packages
@pytest.mark.parametrize("name", ["image", "downstream", "develop", "index"])
def test_fifty_failing_solves_under_load_end_by_their_status_never_a_signal(name, failing_commands):
    argv, extra, status, line = failing_commands[name]
    if name == "image" and not (shutil.which("umoci") and shutil.which("skopeo")):
        pytest.skip("image checks for umoci and skopeo before it solves: apt-get install umoci skopeo")
    environ = {k: v for k, v in os.environ.items() if k != "RUST_BACKTRACE"}   # a panic names itself in one line

    def once(run: int) -> subprocess.CompletedProcess:
        if name == "index":
            shutil.copytree(failing_commands["index"][0][-1].format(run="template"), argv[-1].format(run=run))
        return subprocess.run([arg.format(run=run) for arg in argv], cwd=REPO_ROOT, capture_output=True,
                              env={**environ, **{k: v.format(run=run) for k, v in extra.items()}},
                              text=True, timeout=300)

    loops = _busy_loops(BUSY_LOOPS)
    try:
        with ThreadPoolExecutor(AT_ONCE) as pool:
            results = list(pool.map(once, range(RUNS)))
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    signals = Counter(signal.Signals(-r.returncode).name for r in results if r.returncode < 0)
    odd = [(r.returncode, r.stderr[-800:]) for r in results if r.returncode != status
           or not (r.stderr.strip().splitlines() or [""])[-1].startswith(line)
           or "Fatal Python error" in r.stderr or "Traceback" in r.stderr]
    assert signals == Counter(), odd[:2]
    assert odd == []
