"""The build stage's driver, run by the environment's own python inside the build stage
(standard library only; any Python 3.10+). Argument: the JSON plan build_stage.py writes.

Each requirement is downloaded first, then unpacked at a fixed path (/build/src/NAME) and built
there: pip would otherwise build in a random temp folder, whose name the compiler writes into
the binaries (debug info), and two builds of one image would differ.

A built wheel is kept in the wheel cache (/wheel-cache, when mounted) under a key of the
downloaded archive's sha256, the requirement's build options and the plan's context (the
image's conda packages, the build stage's base): the same inputs build the same wheel, and a
compile such as torch-scatter's takes minutes.
"""
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

BUILD = Path("/build")
CACHE = Path("/wheel-cache")
CCACHE_NAMES = "/usr/lib/ccache"
SHOWN = ("PIP_CERT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_PROXY")
# per-requirement options pip wheel takes on its command line (--hash only checks the download)
WHEEL_OPTIONS = ("--config-settings", "-C", "--global-option")


def pip(*args):
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir", *args]
    return subprocess.run(command, stderr=subprocess.STDOUT).returncode == 0


def wheel_arguments(isolation, pip_args, wheels, source, requirement):
    """pip wheel's arguments for one unpacked sdist. -v: the build backend's output, compiler
    lines included, flows to the host, whose heartbeat names the file being compiled (without
    it pip shows a build's output only when the build fails)."""
    return ["wheel", "-v", "--no-deps", *isolation, *pip_args, "-w", str(wheels), str(source),
            *wheel_options(requirement)]


def unpack(archive, dest):
    """The archive's one top folder, unpacked under dest."""
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
            tops = {name.split("/")[0] for name in zf.namelist()}
    else:
        with tarfile.open(archive) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, filter="data")
            else:
                tf.extractall(dest)
            tops = {name.split("/")[0] for name in tf.getnames()}
    return dest / tops.pop() if len(tops) == 1 else None


def wheel_options(requirement):
    tokens, kept = shlex.split(requirement), []
    for index, token in enumerate(tokens):
        if token.split("=", 1)[0] in WHEEL_OPTIONS:
            kept += [token] if "=" in token else tokens[index:index + 2]
    return kept


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_key(context, archive, requirement, isolated):
    """The wheel's inputs: what the plan says about the image, the archive's bytes, the options."""
    inputs = {"context": context, "archive": sha256(archive), "options": wheel_options(requirement),
              "isolated": isolated}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]


def from_cache(key, wheels):
    """Copies the cached wheels of `key` into `wheels`; their names, or [] when not cached."""
    entry = CACHE / key
    cached = sorted(entry.glob("*.whl")) if entry.is_dir() else []
    for wheel in cached:
        shutil.copy2(wheel, wheels / wheel.name)
    return [wheel.name for wheel in cached]


def store(key, built):
    """Into the cache under `key`, whole or not at all (a temp folder renamed)."""
    if not CACHE.is_dir() or not built:
        return
    partial = CACHE / f".{key}.partial-{os.getpid()}"
    partial.mkdir()
    for wheel in built:
        shutil.copy2(wheel, partial / wheel.name)
    try:
        os.replace(partial, CACHE / key)
    except OSError:  # another build stored it first: the same inputs, the same wheel
        shutil.rmtree(partial, ignore_errors=True)


def main():
    plan = json.loads(Path(sys.argv[1]).read_text())
    if os.environ.get("CCACHE_DIR") and Path(CCACHE_NAMES).is_dir():
        # Debian's ccache names itself gcc, g++, cc and c++ there: every compile goes through it
        os.environ["PATH"] = f"{CCACHE_NAMES}:{os.environ['PATH']}"
    # names only, never values: an index URL may carry a password
    given = [name + (" (a readable file)" if name == "PIP_CERT" and os.access(os.environ[name], os.R_OK) else "")
             for name in SHOWN if os.environ.get(name)]
    if given:
        print(f"build stage: pip gets {', '.join(given)}", flush=True)
    wheels = BUILD / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for number, item in enumerate(plan["items"]):
        print(f"::item {number}", flush=True)
        isolation = [] if item["isolated"] else ["--no-build-isolation"]
        download = BUILD / "download" / str(number)
        requirements = BUILD / "requirements" / f"{number}.txt"
        requirements.parent.mkdir(parents=True, exist_ok=True)
        requirements.write_text("".join(f"{line}\n" for line in plan["options"] + [item["requirement"]]))
        if not pip("download", "--no-deps", *isolation, *plan["pip_args"], "-d", str(download), "-r", str(requirements)):
            sys.exit(f"::failed {number}")
        files = sorted(download.iterdir()) if download.is_dir() else []
        if not files:
            print(f"build stage: {item['requirement']}: its markers exclude it here", flush=True)
            continue
        archive = files[0]
        if archive.suffix == ".whl":
            shutil.copy2(archive, wheels / archive.name)
            continue
        key = None
        if plan.get("context") and CACHE.is_dir():
            key = cache_key(plan["context"], archive, item["requirement"], item["isolated"])
            names = from_cache(key, wheels)
            if names:
                print(f"build stage: {item['requirement']}: {', '.join(names)} from the wheel cache ({key})",
                      flush=True)
                continue
        source = unpack(archive, BUILD / "src")
        if source is None:
            sys.exit(f"::failed {number}: {archive.name} has no single top folder")
        print(f"build stage: building {item['requirement']} from {archive.name}", flush=True)
        before = set(wheels.iterdir())
        if not pip(*wheel_arguments(isolation, plan["pip_args"], wheels, source, item["requirement"])):
            sys.exit(f"::failed {number}")
        built = sorted(set(wheels.iterdir()) - before)
        print(f"build stage: built {', '.join(wheel.name for wheel in built)}", flush=True)
        if key is not None:
            store(key, built)
    # the last word, in a file: the host trusts it over an engine that lost the exit code
    done = BUILD / "done.json.partial"
    done.write_text(json.dumps({"wheels": sorted(wheel.name for wheel in wheels.iterdir())}))
    os.replace(done, BUILD / "done.json")


if __name__ == "__main__":
    main()
