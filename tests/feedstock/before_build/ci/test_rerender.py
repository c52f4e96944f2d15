"""``python -m feedstock rerender`` as a maintainer runs it: real processes on real files."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time

import yaml

from tests.support.feedstock_cli import run_feedstock_cli, snapshot
from tests.support.paths import REPO_ROOT

CI_SUPPORT = REPO_ROOT / ".ci_support"


def test_committed_ci_support_is_current():
    proc = run_feedstock_cli("rerender", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "up to date" in proc.stdout


def test_committed_matrix_covers_every_variant():
    configs = {p.stem: yaml.safe_load(p.read_text()) for p in CI_SUPPORT.glob("*.yaml")}
    linux64 = {(c["gpu_backend"][0], c["cuda_compiler_version"][0], c["blas_impl"][0])
               for c in configs.values() if c["target_platform"] == ["linux-64"]}
    backends = {("cpu", "None"), ("cuda", "12.9"), ("cuda", "13.0"), ("rocm", "None")}
    assert linux64 == {(g, v, b) for g, v in backends for b in ("mkl", "generic")}
    platforms = {c["target_platform"][0] for c in configs.values()}
    assert platforms == {"linux-64", "linux-aarch64", "osx-arm64"}
    for name, config in configs.items():
        assert len(config["python"]) >= 5, name          # every supported Python in the job
        if config["target_platform"][0].startswith("linux"):
            assert len(config["docker_image"]) == 1 and config["docker_image"][0], name
            assert config["megabuild"] == [True] or config["megabuild"] == ["true"], name
        rocm = config.get("gpu_backend") == ["rocm"]
        if rocm:
            assert "rocm" in config["docker_image"][0], name


def test_rerender_is_deterministic_and_reproduces_the_committed_files(feedstock_copy):
    shutil.rmtree(feedstock_copy / ".ci_support")
    first = run_feedstock_cli("rerender", root=feedstock_copy)
    assert first.returncode == 0, first.stderr
    assert snapshot(feedstock_copy / ".ci_support") == snapshot(CI_SUPPORT)
    second = run_feedstock_cli("rerender", root=feedstock_copy)
    assert second.returncode == 0 and "0 written, 0 removed" in second.stdout
    assert snapshot(feedstock_copy / ".ci_support") == snapshot(CI_SUPPORT)


def test_check_names_edited_missing_and_extra_files_and_writes_nothing(feedstock_copy):
    ci = feedstock_copy / ".ci_support"
    edited, removed = sorted(ci.glob("*.yaml"))[:2]
    edited.write_text(edited.read_text().replace("conda-forge main", "conda-forge dev"))
    removed.unlink()
    (ci / "linux_64_old_job.yaml").write_text("python:\n- 3.9\n")
    before = snapshot(ci)
    proc = run_feedstock_cli("rerender", "--check", root=feedstock_copy)
    assert proc.returncode == 1
    assert f".ci_support/{edited.name}: out of date" in proc.stdout
    assert f".ci_support/{removed.name}: missing" in proc.stdout
    assert ".ci_support/linux_64_old_job.yaml" in proc.stdout
    assert "run: python -m feedstock rerender" in proc.stderr
    assert snapshot(ci) == before
    # rerender repairs all three, removing the stale file
    fixed = run_feedstock_cli("rerender", root=feedstock_copy)
    assert fixed.returncode == 0, fixed.stderr
    assert snapshot(ci) == snapshot(CI_SUPPORT)


def test_recipe_change_makes_check_fail(feedstock_copy):
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    cbc.write_text(cbc.read_text().replace("  - mkl                         # [x86_64]\n", ""))
    proc = run_feedstock_cli("rerender", "--check", root=feedstock_copy)
    assert proc.returncode == 1
    assert "blas_implmkl" in proc.stdout and "not produced" in proc.stdout


def _assert_clean_failure(proc, feedstock_copy, *needles):
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    assert snapshot(feedstock_copy / ".ci_support") == snapshot(CI_SUPPORT)
    assert not list(feedstock_copy.glob(".ci_support.tmp-*"))


def test_bad_selector_in_config_is_one_line_and_nothing_written(feedstock_copy):
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    cbc.write_text(cbc.read_text().replace("# [x86_64]", "# [x86_64 and]", 1))
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "recipe/conda_build_config.yaml:", "[x86_64 and]", "does not parse")


def test_unequal_zip_keys_is_one_line_and_nothing_written(feedstock_copy):
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    text = cbc.read_text()
    # drop the ROCm entry of one zipped key only
    cbc.write_text(text.replace("  - 7.2                         # [linux64]\n", "", 1))
    assert cbc.read_text() != text
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "zip_keys group", "rocm_version", "different lengths")


def test_invalid_yaml_and_not_a_feedstock(feedstock_copy, tmp_path):
    pinning = feedstock_copy / "pinning.yaml"
    pinning.write_text(pinning.read_text() + "\npython: [unclosed\n")
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "pinning.yaml", "invalid YAML")
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_feedstock_cli("rerender", root=empty)
    assert proc.returncode == 2 and "not a feedstock" in proc.stderr
    assert not (empty / ".ci_support").exists()


def test_malformed_conda_forge_yml_is_one_line_and_nothing_written(feedstock_copy):
    forge = feedstock_copy / "conda-forge.yml"
    original = forge.read_text()
    for text, needles in (("- linux_64\n", ("conda-forge.yml must be a mapping",)),
                          ("provider: [linux_64]\n", ("provider must be a mapping",)),
                          (original.replace("provider:\n", "provider:\n  foo_bar: default\n", 1),
                           ("provider names unknown platform 'foo_bar'",))):
        forge.write_text(text)
        for args in (("rerender",), ("rerender", "--check"), ("lint",)):
            proc = run_feedstock_cli(*args, root=feedstock_copy)
            assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
            _assert_clean_failure(proc, feedstock_copy, *needles)


SMITHY_SERVICES = ("conda-smithy knows azure, github_actions, default, emulated, native, None and the "
                   "deprecated circle, travis, appveyor, drone, woodpecker; false or null turns a platform off")


def test_typo_in_a_provider_is_refused_not_taken_as_enabled(feedstock_copy):
    forge = feedstock_copy / "conda-forge.yml"
    original = forge.read_text()
    for old, new, line in (
            ("osx_arm64: github_actions", "osx_arm64: github_action",
             f"conda-forge.yml: provider.osx_arm64: unknown CI service 'github_action'; "
             f"did you mean github_actions? ({SMITHY_SERVICES})"),
            ("osx_64: None", "osx_64: none",     # conda-smithy's schema knows only `None`
             f"conda-forge.yml: provider.osx_64: unknown CI service 'none'; did you mean None? ({SMITHY_SERVICES})"),
            ("osx_arm64: github_actions", "osx_arm46: github_actions",
             "conda-forge.yml: provider names unknown platform 'osx_arm46'; did you mean osx_arm64?"),
            ("osx_64: None", "osx_46: None",     # even a platform switched off must be spelt right
             "conda-forge.yml: provider names unknown platform 'osx_46'; did you mean osx_64?")):
        assert old in original
        forge.write_text(original.replace(old, new, 1))
        for args in (("rerender",), ("rerender", "--check"), ("lint",)):
            proc = run_feedstock_cli(*args, root=feedstock_copy)
            assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
            _assert_clean_failure(proc, feedstock_copy, line)
            assert proc.stderr == f"error: {line}\n"


def test_every_provider_value_conda_smithy_knows_is_accepted(feedstock_copy):
    forge = feedstock_copy / "conda-forge.yml"
    original = forge.read_text()
    for value, osx_jobs in (("azure", True), ("[github_actions, azure]", True), ("native", True),
                            ("false", False), ("null", False), ("[]", False)):
        forge.write_text(original.replace("osx_arm64: github_actions", f"osx_arm64: {value}", 1))
        proc = run_feedstock_cli("rerender", "--check", root=feedstock_copy)
        assert proc.returncode == (0 if osx_jobs else 1), (value, proc.stdout, proc.stderr)
        assert ("osx_arm64_.yaml" in proc.stdout) is not osx_jobs, value


def test_pinning_file_kept_in_ci_support_is_an_input_not_a_stale_job(feedstock_copy):
    pinning = feedstock_copy / ".ci_support" / "pinning.yaml"
    (feedstock_copy / "pinning.yaml").rename(pinning)
    content = pinning.read_bytes()
    for args in (("rerender", "--check"), ("lint",), ("rerender",)):
        proc = run_feedstock_cli(*args, root=feedstock_copy)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        assert "pinning.yaml" not in proc.stdout, (args, proc.stdout)
    assert pinning.read_bytes() == content
    assert {n: b for n, b in snapshot(feedstock_copy / ".ci_support").items() if n != "pinning.yaml"} \
        == snapshot(CI_SUPPORT)


def test_help_explains_every_subcommand():
    top = run_feedstock_cli("--help")
    assert top.returncode == 0
    for word in ("rerender", "render", "lint", "conda_build_config.yaml"):
        assert word in top.stdout
    for sub, phrase in (("rerender", "--check"), ("render", "build string"), ("lint", "zip_keys")):
        proc = run_feedstock_cli(sub, "--help")
        assert proc.returncode == 0 and phrase in proc.stdout, proc.stdout


def test_unwritable_ci_support_is_one_line_and_keeps_the_users_file(feedstock_copy):
    ci = feedstock_copy / ".ci_support"
    for path in ci.iterdir():
        path.unlink()
    ci.rmdir()
    ci.write_text("a file where the folder should be\n")
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == ["error: .ci_support is a file; a folder belongs there; fix or remove it"], proc.stderr
    assert ci.read_text() == "a file where the folder should be\n"
    assert not list(feedstock_copy.glob(".ci_support.tmp-*"))


def test_an_unknown_selector_is_refused_before_anything_is_written(feedstock_copy):
    """Issue 25: `# [x86_65]` read as False and rerender deleted every MKL job with exit 0."""
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    text = cbc.read_text()
    assert "  - mkl                         # [x86_64]\n" in text
    cbc.write_text(text.replace("  - mkl                         # [x86_64]\n",
                                "  - mkl                         # [x86_65]\n", 1))
    before = snapshot(feedstock_copy / ".ci_support"), snapshot(feedstock_copy / "recipe")
    for args in (("rerender",), ("rerender", "--check")):
        proc = run_feedstock_cli(*args, root=feedstock_copy)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "selector [x86_65] uses unknown name(s) x86_65 (did you mean x86_64" in errors[0]
        assert "wrote nothing" in errors[0]
        assert (snapshot(feedstock_copy / ".ci_support"), snapshot(feedstock_copy / "recipe")) == before


def test_a_misspelt_top_level_key_in_conda_forge_yml_is_refused(feedstock_copy):
    """Issue 25: `github_action:` was ignored and the workflow timeout fell from 1440 to 360."""
    forge = feedstock_copy / "conda-forge.yml"
    forge.write_text(forge.read_text().replace("github_actions:", "github_action:", 1))
    before = snapshot(feedstock_copy / ".ci_support"), snapshot(feedstock_copy / ".github" / "workflows")
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: conda-forge.yml: unknown top-level key 'github_action' (conda-smithy's schema allows "
        "no others); did you mean github_actions?"]
    assert (snapshot(feedstock_copy / ".ci_support"), snapshot(feedstock_copy / ".github" / "workflows")) == before


def test_a_config_file_that_is_not_utf8_is_one_line(feedstock_copy):
    """Issue 25: a Latin-1 byte in conda_build_config.yaml was a UnicodeDecodeError traceback."""
    cbc = feedstock_copy / "recipe" / "conda_build_config.yaml"
    cbc.write_bytes(cbc.read_bytes().replace(b"# [linux]", b"# caf\xe9 [linux]", 1))
    before = snapshot(feedstock_copy / ".ci_support")
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: recipe/conda_build_config.yaml:") and "byte 0xe9 is not UTF-8" in line
    assert snapshot(feedstock_copy / ".ci_support") == before


def test_ctrl_c_is_one_line_and_exit_130(feedstock_copy):
    """Issue 25: Ctrl-C printed a 30-47 line KeyboardInterrupt traceback."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "feedstock", "--feedstock-root", str(feedstock_copy), "lint"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # lint renders every job: several seconds
    assert proc.poll() is None, "lint finished before the signal; the test needs a longer command"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["error: python -m feedstock lint interrupted"]


def _generated(root):
    workflow = root / ".github" / "workflows" / "build.yml"
    return snapshot(root / ".ci_support"), workflow.read_bytes() if workflow.exists() else None


def test_rerender_is_all_or_nothing_under_ctrl_c(feedstock_copy, tmp_path):
    """Issue 25: Ctrl-C at the right moment left 5 of 13 job files new and 8 old. Interrupted at
    many moments, the generated files are always all old or all new."""
    import signal
    import subprocess
    import sys
    import time

    for job in (feedstock_copy / ".ci_support").glob("*.yaml"):
        job.write_text(job.read_text() + "# stale\n")
    (feedstock_copy / ".github" / "workflows" / "build.yml").unlink()
    old = _generated(feedstock_copy)
    done = shutil.copytree(feedstock_copy, tmp_path / "done")
    assert run_feedstock_cli("rerender", root=done).returncode == 0
    new = _generated(done)
    assert old != new
    outcomes = []
    for delay in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0):
        proc = subprocess.Popen([sys.executable, "-m", "feedstock", "--feedstock-root", str(feedstock_copy), "rerender"],
                                cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        state = _generated(feedstock_copy)
        assert state in (old, new), f"mixed tree after SIGINT at {delay}s (exit {proc.returncode})"
        # on a loaded machine the earliest SIGINT can land while CPython itself starts (site or
        # runpy not imported yet): its own traceback, before any code of ours, with nothing written
        if "Could not import runpy module" in err or "init_import_site" in err:
            assert state == old, err
            continue
        assert "Traceback" not in err, err
        outcomes.append((proc.returncode, state == new))
        if state == new:  # start over from the old tree
            shutil.rmtree(feedstock_copy / ".ci_support")
            for name, data in old[0].items():
                (feedstock_copy / ".ci_support").mkdir(exist_ok=True)
                (feedstock_copy / ".ci_support" / name).write_bytes(data)
            (feedstock_copy / ".github" / "workflows" / "build.yml").unlink(missing_ok=True)
            assert _generated(feedstock_copy) == old
    assert any(code == 130 for code, _ in outcomes), outcomes  # some runs were interrupted


def test_an_empty_or_folder_pinning_file_is_refused_not_taken_as_no_pins(feedstock_copy):
    # before: rerender rewrote all 13 job files without a single pin, exit 0
    pinning = feedstock_copy / "pinning.yaml"
    pinning.write_text("")
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "pinning.yaml has no variant keys", "is it empty?")
    pinning.unlink()
    pinning.mkdir()
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "pinning.yaml is a folder")


def test_an_empty_or_looping_ci_runners_yml_is_refused(feedstock_copy):
    # before: the workflow lost its GPU runners (empty) or the file was taken as absent (loop)
    runners = feedstock_copy / "ci-runners.yml"
    runners.write_text("")
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "ci-runners.yml is empty")
    runners.unlink()
    runners.symlink_to("ci-runners.yml")
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "ci-runners.yml is a symbolic link loop")


def test_an_empty_recipe_is_refused_not_rendered_to_three_jobs(feedstock_copy):
    # before: 3 job files written and 12 removed, exit 0
    (feedstock_copy / "recipe" / "meta.yaml").write_text("")
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "recipe/meta.yaml renders to no recipe")


def test_without_conda_forge_yml_a_default_platform_is_named_as_the_cause(feedstock_copy):
    # before: "pinning.yaml: zip_keys group ... has no values on win-64" and nothing else
    (feedstock_copy / "conda-forge.yml").unlink()
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    _assert_clean_failure(proc, feedstock_copy, "win-64 is built only because conda-smithy builds",
                          "conda-forge.yml is missing or empty", "provider: win_64: None")


def test_a_second_writer_waits_for_the_first(feedstock_copy):
    # before: two rerenders raced, and the loser was told to check permissions and free space
    for job in (feedstock_copy / ".ci_support").glob("linux_*.yaml"):
        job.unlink()
    holder = os.open(feedstock_copy, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)     # the first writer, still at work
    proc = subprocess.Popen([sys.executable, "-m", "feedstock", "--feedstock-root", str(feedstock_copy), "rerender"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        assert proc.poll() is None, proc.communicate()
        assert not list((feedstock_copy / ".ci_support").glob("linux_*.yaml"))   # nothing written yet
    finally:
        os.close(holder)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert err.strip() == f"rerender: another command is writing {feedstock_copy}; waiting for it to finish"
    assert "(12 written, 0 removed" in out


def test_a_check_runs_beside_another_reader_and_waits_only_for_a_writer(feedstock_copy):
    # before: `patches check` beside another read-only command on the same feedstock waited for it
    # and said "another command is writing" (seen in a fresh CI run: a failed test)
    holder = os.open(feedstock_copy, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_SH)     # another reader, still at work
        beside = run_feedstock_cli("rerender", "--check", root=feedstock_copy)
        assert beside.returncode == 0, beside.stderr
        assert "another command" not in beside.stderr, beside.stderr
        fcntl.flock(holder, fcntl.LOCK_EX)     # now a writer
        proc = subprocess.Popen([sys.executable, "-m", "feedstock", "--feedstock-root", str(feedstock_copy),
                                 "rerender", "--check"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        assert proc.poll() is None, proc.communicate()
    finally:
        os.close(holder)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert err.strip() == f"rerender: another command is writing {feedstock_copy}; waiting for it to finish"


def test_a_killed_rerenders_temporary_files_fail_the_check_and_the_next_rerender_removes_them(feedstock_copy):
    """Issue 35: `kill -9` while rerender writes left `.ci_support/.<job>.yaml.*.tmp`; later
    rerenders kept them and --check said up to date."""
    ci = feedstock_copy / ".ci_support"
    job = sorted(ci.glob("*.yaml"))[0].name
    left = ci / f".{job}.k3x9_q2a.tmp"
    left.write_text("half a file")
    workflow_left = feedstock_copy / ".github" / "workflows" / ".build.yml.ab12cd34.tmp"
    workflow_left.parent.mkdir(parents=True, exist_ok=True)
    workflow_left.write_text("half")
    other = ci / "notes.tmp"   # not one of ours: stays
    other.write_text("mine")
    check = run_feedstock_cli("rerender", "--check", root=feedstock_copy)
    assert check.returncode == 1
    assert f".ci_support/{left.name}: a temporary file an interrupted rerender left (rerender removes it)" \
        in check.stdout.splitlines()
    assert left.exists()   # --check writes nothing
    proc = run_feedstock_cli("rerender", root=feedstock_copy)
    assert proc.returncode == 0, proc.stderr
    assert f"removed  .ci_support/{left.name} (left by an interrupted rerender)" in proc.stdout.splitlines()
    assert not left.exists() and not workflow_left.exists() and other.read_text() == "mine"
    assert run_feedstock_cli("rerender", "--check", root=feedstock_copy).returncode == 0
