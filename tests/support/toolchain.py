"""A local conda channel of real .conda packages, built by rattler-build from this machine's tools.

conda-forge cannot be reached, so the names the feedstock's recipe.yaml needs at build, host and
test time are satisfied by packages built here (`build_toolchain_channel`):

- `python`: a virtual environment of a pyenv CPython (interpreter copied, `home` pointing at the
  pyenv install), build string `..._cpython` as the pinning asks;
- PyPI wheels (numpy, pyyaml, pip, setuptools, ... and what they need), installed per Python
  into that environment by pip and packaged;
- compilers (`gcc_linux-64`, `gxx_linux-64`, `cuda-nvcc_linux-64`, `sysroot_linux-64`) as
  activation scripts that point CC / CXX / CUDACXX at /usr/bin/gcc, g++ and nvcc;
- cmake and ninja from PyPI's wheels (tests/support/build_tools.py): the upstream release
  binaries at the versions megabuild/tool_versions.py names, what a conda build gets today, never
  this machine's own;
- the other build tools (make, pkg-config, ccache) as wrappers around the system's;
- every other name (sleef, libprotobuf, the CUDA -dev libraries, ...) as an empty package whose
  version satisfies the recipe's pin: the test project links none of them, and each one says
  in its summary that it is a stand-in.

Which names are needed is read from the recipe itself (rattler-build's render for the job), so
a requirement added to recipe.yaml gets its package here without editing this file.
"""
from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.build_tools import NEWEST_CMAKE, TESTED_NINJA, BuildToolsUnavailable, cmake_bin, ninja_bin

REPO_ROOT = Path(__file__).resolve().parents[2]
# pinned wheels: the layout test's list (numpy, torch's runtime deps, pybind11) plus this one's
WHEEL_PINS = (REPO_ROOT / "tests" / "support" / "real_wheel" / "prefix-requirements.txt",
              Path(__file__).resolve().parent / "channel-requirements.txt")
TOOLS = ("make", "pkg-config", "ccache")  # wrapped
PYPI_TOOLS = {"cmake": NEWEST_CMAKE, "ninja": TESTED_NINJA}  # packaged from PyPI's wheels
# conda names that differ from the normalised PyPI name
CONDA_NAMES = {"typing-extensions": "typing_extensions"}
# conda packages that hold more than their PyPI namesake: conda-forge's pybind11 also puts the
# headers and CMake files into $PREFIX/include and $PREFIX/share, as PyPI's pybind11-global does
# (torch/extension.h includes <pybind11/pybind11.h> from $PREFIX/include)
COMPANION_WHEELS = {"pybind11": ("pybind11-global",)}


class ToolchainUnavailable(Exception):
    """Something the channel needs is missing on this machine; tests skip with this reason."""


def pypi_to_conda(name: str) -> str:
    canonical = re.sub(r"[-_.]+", "-", name).lower()
    return CONDA_NAMES.get(canonical, canonical)


def wheel_pins() -> dict[str, str]:
    """conda name -> pinned version, from the pin files (`Name==version` lines)."""
    pins: dict[str, str] = {}
    for path in WHEEL_PINS:
        for line in path.read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
            if match:
                pins[pypi_to_conda(match.group(1))] = match.group(2)
    return pins


@dataclass(frozen=True)
class Spec:
    """A requirement as the recipe writes it: name, version pattern, build pattern."""

    name: str
    version: str = ""
    build: str = ""

    @classmethod
    def parse(cls, text: str) -> "Spec":
        parts = str(text).split()
        return cls(parts[0], parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else "")

    def satisfying_version(self) -> str:
        """A version inside the pattern (`20260526.*` -> 20260526, `==12.9` -> 12.9)."""
        first = re.split(r",|\|", self.version)[0] if self.version else ""
        version = re.sub(r"^(==|>=|~=|=)", "", first).replace(".*", "").rstrip("*").rstrip(".")
        if not version or version.startswith(("<", "!")):
            return "1.0"
        return version

    def satisfying_build(self) -> str:
        if self.build and self.build != "*":
            return "local_" + self.build.strip("*").strip("_")
        return "local_0"


def _run(args: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


def machine_versions() -> dict[str, str]:
    """Versions of the system tools the channel wraps (for the packages' versions and the variant)."""
    versions: dict[str, str] = {}
    gcc = _run(["gcc", "-dumpfullversion"])
    if gcc.returncode != 0:
        raise ToolchainUnavailable("gcc not found; the local toolchain channel wraps the system gcc")
    versions["gcc"] = gcc.stdout.strip()
    libc = platform.libc_ver()
    if libc[0] != "glibc":
        raise ToolchainUnavailable("not a glibc system; sysroot_linux-64 stands for the system glibc")
    versions["glibc"] = libc[1]
    for tool in TOOLS:
        path = shutil.which(tool)
        if path is None:
            raise ToolchainUnavailable(f"{tool} not found on PATH; the toolchain channel wraps it")
        out = _run([path, "--version"]).stdout
        match = re.search(r"(\d+\.\d+(?:\.\d+)?)", out)
        versions[tool] = match.group(1) if match else "1.0"
    versions.update(PYPI_TOOLS)
    nvcc = shutil.which("nvcc")
    if nvcc:
        match = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", _run([nvcc, "--version"]).stdout)
        if match:
            versions["nvcc"] = match.group(2)
    return versions


# --- recipe text ---------------------------------------------------------------------------

def _yaml(value: object) -> str:
    return json.dumps(value)  # JSON strings are valid YAML scalars


def recipe_output(name: str, version: str, build: str, script: list[str], summary: str,
            host: list[str] | None = None, run: list[str] | None = None,
            extra_build: dict | None = None) -> dict:
    out: dict = {"package": {"name": name, "version": version},
                 "build": {"number": 0, "string": build, "script": script or ["true"],
                           **(extra_build or {})},
                 "about": {"summary": summary, "license": "LicenseRef-local-stand-in"}}
    requirements = {k: v for k, v in (("host", host), ("run", run)) if v}
    if requirements:
        out["requirements"] = requirements
    return out


def multi_output_recipe(name: str, outputs: list[dict]) -> str:
    return json.dumps({"schema_version": 1, "recipe": {"name": name, "version": "1.0"},
                       "outputs": outputs}, indent=1)


def python_series(py: str) -> str:
    """"3.13t" (a free-threaded Python, as --python and the tests name it) -> "3.13"."""
    return py.removesuffix("t")


def python_build_tag(py: str) -> str:
    """The build-string tag the pinning asks of `python`: _cpython, or _cp313t free-threaded."""
    return f"cp{python_series(py).replace('.', '')}t" if py.endswith("t") else "cpython"


def python_output(version: str, interpreter: Path, py: str) -> dict:
    """`python`: a virtual environment of the pyenv interpreter, copied into $PREFIX.

    Like conda-forge's python (whose run_exports add `python_abi x.y`), anything built against
    it must run on the same x.y: its run_exports pin `python >=x.y,<x.(y+1)`. `py`: the label the
    channel's Pythons go by (3.12, or 3.13t for a free-threaded one)."""
    home = interpreter.resolve().parent
    short = ".".join(version.split(".")[:2])
    out = recipe_output(
        "python", version, f"local_0_{python_build_tag(py)}",
        [f'"{interpreter}" -m venv --copies --without-pip "$PREFIX"',
         'rm -f "$PREFIX"/bin/activate* "$PREFIX"/bin/Activate.ps1'],
        f"CPython {version} of this machine ({home.parent}) as a conda python: a virtual "
        "environment with a copied interpreter; only runs where that install exists",
        # the interpreter links libpython from the pyenv install: leave its rpath alone
        extra_build={"dynamic_linking": {"binary_relocation": False},
                     "python": {"skip_pyc_compilation": ["**/*.py"]}})
    out["requirements"] = {"run_exports": {"weak": [f"python >={short},<{_next_minor(short)}.0a0"]}}
    return out


def wheel_requirements(wheel: Path) -> list[str]:
    """Requires-Dist without extras or environment markers, as conda specs."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    specs = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if ";" in req:
            continue
        match = re.match(r"([A-Za-z0-9_.-]+)\s*\(?([^)]*)\)?", req)
        if match:
            specs.append(f"{pypi_to_conda(match.group(1))} {match.group(2).replace(' ', '')}".strip())
    return specs


def wheel_output(name: str, version: str, wheel: Path, pip_wheel: Path, py: str,
                 companions: tuple[Path, ...] = ()) -> dict:
    """A PyPI wheel (and its companions) installed by pip into the host Python and packaged for
    that Python."""
    tag = py.replace(".", "")
    series = python_series(py)
    wheels = " ".join(f'"{w}"' for w in (wheel, *companions))
    return recipe_output(
        name, version, f"py{tag}_local_0",
        [f'"$PREFIX/bin/python" "{pip_wheel}/pip" install --no-deps --no-index '
         f'--disable-pip-version-check --no-warn-script-location {wheels}'],
        f"{', '.join(w.name for w in (wheel, *companions))} from PyPI, installed by pip into Python {py}",
        host=[f"python {series}.* *_{python_build_tag(py)}"],
        run=[f"python >={series},<{_next_minor(series)}.0a0"] + wheel_requirements(wheel),
        # pip compiles the byte code in one process (as conda-forge's packages ship it, so a
        # build that imports them writes nothing into the host prefix); rattler-build would
        # compile again one process per file: slow for sympy's thousands
        extra_build={"python": {"skip_pyc_compilation": ["**/*.py"]}})


def _next_minor(py: str) -> str:
    major, minor = py.split(".")[:2]
    return f"{major}.{int(minor) + 1}"


def activation_output(name: str, version: str, exports: dict[str, str], summary: str) -> dict:
    lines = [f"export {k}={v}" for k, v in exports.items()]
    script = ['mkdir -p "$PREFIX/etc/conda/activate.d"']
    script += [f"echo '{line}' >> \"$PREFIX/etc/conda/activate.d/{name}.sh\"" for line in lines]
    return recipe_output(name, version, "local_0", script, summary)


def tool_output(name: str, version: str) -> dict:
    path = shutil.which(name)
    return recipe_output(name, version, "local_0",
                   ['mkdir -p "$PREFIX/bin"',
                    f"printf '#!/bin/sh\\nexec {path} \"$@\"\\n' > \"$PREFIX/bin/{name}\"",
                    f'chmod +x "$PREFIX/bin/{name}"'],
                   f"this machine's {path}, wrapped")


def pypi_tool_output(name: str, version: str) -> dict:
    """cmake or ninja: the binaries of PyPI's wheel, laid out as conda-forge's package lays them
    out ($PREFIX/bin, and CMake's modules under $PREFIX/share/cmake-X.Y)."""
    try:
        if name == "cmake":
            data = cmake_bin(version).parent
            script = ['mkdir -p "$PREFIX"', f'cp -a "{data}/bin" "{data}/share" "$PREFIX/"']
        else:
            script = ['mkdir -p "$PREFIX/bin"', f'cp "{ninja_bin(version)}/ninja" "$PREFIX/bin/ninja"']
    except BuildToolsUnavailable as exc:
        raise ToolchainUnavailable(str(exc)) from None
    return recipe_output(name, version, "local_0", script,
                         f"PyPI's {name}=={version} wheel: the upstream release binaries")


def stand_in_output(spec: Spec) -> dict:
    return recipe_output(spec.name, spec.satisfying_version(), spec.satisfying_build(),
                   ['mkdir -p "$PREFIX/share/toolchain-stand-ins"',
                    f'echo "{spec.name}" > "$PREFIX/share/toolchain-stand-ins/{spec.name}"'],
                   f"stand-in: empty {spec.name} for the offline test build (the test project "
                   "links no such library)")


# --- channel ---------------------------------------------------------------------------------

def index_channel(channel: Path) -> None:
    """repodata.json for every subdir, by the feedstock's own index command in a child process
    (py-rattler can crash the interpreter that indexed when it exits; see rattler_build_py.py)."""
    subprocess.run([sys.executable, str(REPO_ROOT / "localbuild" / "in_container" / "rattler_build_py.py"), "index", str(channel)],
                   check=True, timeout=300)


@dataclass
class Toolchain:
    channel: Path
    pythons: dict[str, Path]
    versions: dict[str, str]
    packages: list[str] = field(default_factory=list)  # name-version-build of every package built
    activations: dict[str, dict[str, str]] = field(default_factory=dict)  # compiler package -> exports

    def names(self) -> set[str]:
        return {p.rsplit("-", 2)[0] for p in self.packages}


def download_wheels(pins: dict[str, str], pythons: list[str], dest: Path) -> dict[tuple[str, str], Path]:
    """(conda name, python) -> wheel file; pip download, offline mirrors allowed."""
    dest.mkdir(parents=True, exist_ok=True)
    wheels: dict[tuple[str, str], Path] = {}
    for py in pythons:
        target = dest / py
        target.mkdir(exist_ok=True)
        reqs = [f"{name}=={version}" for name, version in pins.items()]
        base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                "--python-version", python_series(py), "--platform", "manylinux_2_28_x86_64",
                "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                "-d", target, "--quiet"]
        if py.endswith("t"):
            # a free-threaded Python (3.13t) takes the cp313t wheels and the pure ones; not every
            # pin has a cp313t wheel, and a missing one matters only if the recipe needs it
            # (build_toolchain_channel then says which)
            base += ["--implementation", "cp", "--abi", python_build_tag(py), "--abi", "none"]
            for req in reqs:
                _run([*base, req], timeout=900)
        else:
            proc = _run([*base, *reqs], timeout=900)
            if proc.returncode != 0:
                raise ToolchainUnavailable(f"pip download failed: {proc.stderr.strip()[-300:]}")
        for wheel in target.glob("*.whl"):
            name = pypi_to_conda(wheel.name.split("-")[0])
            wheels[(name, py)] = wheel
    return wheels


def _keep_zipped_entries(data: dict, key: str, values: list[str]) -> None:
    """Where ``values`` picks some of ``key``'s entries (a subset of the job's Pythons), pick the
    same entries of every key zipped with it (``is_freethreading``), or the zip lengths differ."""
    old = data.get(key)
    if not isinstance(old, list) or not all(v in old for v in values):
        return  # a value of this machine's own (gcc, glibc): nothing zipped follows it
    picked = [old.index(v) for v in values]
    for group in data.get("zip_keys") or []:
        if key in group:
            for other in group:
                if other != key and isinstance(data.get(other), list) and len(data[other]) == len(old):
                    data[other] = [data[other][i] for i in picked]


def job_variant_file(job: Path, overrides: dict[str, list[str]], dest: Path) -> Path:
    """The .ci_support job with this machine's values (Pythons, compiler and glibc versions)."""
    import yaml

    data = yaml.safe_load(job.read_text())
    data.pop("channel_sources", None)  # the local channel replaces conda-forge
    for key, values in overrides.items():
        _keep_zipped_entries(data, key, values)
    data.update(overrides)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(data, sort_keys=True))
    return dest


def needed_requirements(recipe: Path, variant_file: Path, run_and_test: bool = True) -> dict[str, Spec]:
    """Every build/host/run/test requirement name of recipe.yaml for this job (rattler-build's
    render); only build/host without `run_and_test` (a develop environment's)."""
    from rattler_build import Stage0Recipe, VariantConfig

    config = VariantConfig.from_file(variant_file)
    needed: dict[str, Spec] = {}
    variants = Stage0Recipe.from_file(recipe).render(config)
    own = {str(v.recipe.package.name) for v in variants}  # the recipe's outputs come from the build
    for rendered in variants:
        data = rendered.recipe.to_dict()
        reqs = data.get("requirements") or {}
        lists = [reqs.get(k) or [] for k in ("build", "host", "run")[:3 if run_and_test else 2]]
        if run_and_test:
            lists += [(t.get("requirements") or {}).get("run") or [] for t in data.get("tests") or []]
        for items in lists:
            for item in items:
                if isinstance(item, dict):
                    continue  # pin_subpackage: one of the recipe's own outputs
                spec = Spec.parse(item)
                if spec.name.startswith("__") or spec.name in own:
                    continue
                # a bare name in build/host takes the variant's pin
                if not spec.version and spec.name.replace("-", "_") in rendered.variant:
                    spec = Spec.parse(f"{spec.name} {rendered.variant[spec.name.replace('-', '_')]}")
                needed.setdefault(spec.name, spec)
    return needed


def build_toolchain_channel(work: Path, pythons: dict[str, Path], recipe: Path,
                            variant_files: list[Path], log=print, run_and_test: bool = True) -> Toolchain:
    """Build every package the recipe needs for these jobs into work/channel (indexed); without
    `run_and_test`, only what its build and host environments need (a develop environment)."""
    versions = machine_versions()
    needed: dict[str, Spec] = {}
    for variant_file in variant_files:
        for name, spec in needed_requirements(recipe, variant_file, run_and_test).items():
            needed.setdefault(name, spec)
    pins = wheel_pins()
    wheels = download_wheels(pins, sorted(pythons), work / "wheels")
    # what the wheels themselves require, transitively
    wheel_names = {n for n in needed if n in pins}
    # free-threaded Pythons only: a pin without a cp3XXt wheel (PyYAML here) becomes an empty
    # stand-in like the other names the test project never imports, and says so in its summary
    free_threaded = all(py.endswith("t") for py in pythons)
    without_wheel = {n for n in wheel_names if any((n, py) not in wheels for py in pythons)} if free_threaded else set()
    wheel_names -= without_wheel
    pending = list(wheel_names)
    while pending:
        name = pending.pop()
        wheel = next((w for (n, _), w in wheels.items() if n == name), None)
        if wheel is None:
            raise ToolchainUnavailable(f"no wheel for {name} in the pins ({', '.join(map(str, WHEEL_PINS))})")
        for dep in wheel_requirements(wheel):
            dep_name = dep.split()[0]
            if dep_name not in wheel_names and dep_name in pins and dep_name not in without_wheel:
                wheel_names.add(dep_name)
                pending.append(dep_name)
    pip_wheel = next((w for (n, _), w in wheels.items() if n == "pip"), None)
    if pip_wheel is None:
        raise ToolchainUnavailable("pip is not among the pinned wheels; it installs the others")

    recipes: list[tuple[str, list[dict]]] = []
    for py, exe in sorted(pythons.items()):
        full = _run([exe, "-c", "import platform; print(platform.python_version())"]).stdout.strip()
        recipes.append((f"toolchain-python{py.replace('.', '')}", [python_output(full, exe, py)]))
    for py in sorted(pythons):
        recipes.append((f"toolchain-wheels-py{py.replace('.', '')}",
                        [wheel_output(name, pins[name], wheels[(name, py)], pip_wheel, py,
                                      tuple(wheels[(c, py)] for c in COMPANION_WHEELS.get(name, ())))
                         for name in sorted(wheel_names)]))
    machine, activations = machine_outputs(needed, versions, skip={"python", *wheel_names})
    recipes.append(("toolchain-machine", machine))

    channel = work / "channel"
    built = build_outputs(work / "recipes", recipes, channel, log)
    return Toolchain(channel=channel, pythons=dict(pythons), versions=versions,
                     packages=[p.removesuffix(".conda") for p in built], activations=activations)


def machine_outputs(needed: dict[str, Spec], versions: dict[str, str],
                    skip: set[str]) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """Package outputs for the needed names not in `skip`: compilers as activations of this
    machine's gcc/g++/nvcc, build tools as wrappers, every other name as an empty stand-in;
    and the compilers' exports."""
    machine: list[dict] = []
    activations: dict[str, dict[str, str]] = {}
    compilers = {
        "gcc_linux-64": ("gcc", {"CC": shutil.which("gcc")}),
        "gxx_linux-64": ("gcc", {"CXX": shutil.which("g++")}),
        "sysroot_linux-64": ("glibc", {}),
    }
    if "nvcc" in versions:
        nvcc = shutil.which("nvcc")
        cuda_home = Path(_run(["sh", "-c", f"readlink -f $(dirname {nvcc})"]).stdout.strip())
        real = re.search(r"exec (\S+/bin/nvcc)", Path(nvcc).read_text(errors="replace")) if Path(nvcc).stat().st_size < 4096 else None
        cuda_root = Path(real.group(1)).parent.parent if real else cuda_home.parent
        # the toolkit's own nvcc (as conda's sits in its toolkit), not the PATH entry, which may
        # be a wrapper: a build whose CMake reports this path took it from the activation
        toolkit_nvcc = cuda_root / "bin" / "nvcc"
        # find_package(Torch) of a CUDA libtorch runs find_package(CUDA) (the old FindCUDA,
        # which resolves /usr/local/bin/nvcc to the wrong root) and looks for libnvrtc.so, which
        # conda's cuda-nvrtc-dev puts into $PREFIX/lib: the toolkit root and the prefix go in
        # through CMAKE_ARGS, as conda-forge's activations pass theirs
        compilers["cuda-nvcc_linux-64"] = ("nvcc", {"CUDACXX": str(toolkit_nvcc if toolkit_nvcc.is_file() else nvcc),
                                                     "CUDA_HOME": str(cuda_root),
                                                     "CMAKE_ARGS": (f'"${{CMAKE_ARGS:-}} -DCUDAToolkit_ROOT={cuda_root} -DCUDA_TOOLKIT_ROOT_DIR={cuda_root} '
                                                                    '-DCMAKE_PREFIX_PATH=${PREFIX:-${CONDA_PREFIX:-}}"')})
    for name, spec in sorted(needed.items()):
        if name in skip:
            continue
        if name in compilers:
            key, exports = compilers[name]
            activations[name] = exports
            machine.append(activation_output(name, versions[key], exports,
                                             f"this machine's {key} {versions[key]} as {name}"))
        elif name in PYPI_TOOLS:
            machine.append(pypi_tool_output(name, PYPI_TOOLS[name]))
        elif name in TOOLS:
            machine.append(tool_output(name, versions[name]))
        elif name.startswith("cuda-nvcc"):
            raise ToolchainUnavailable("nvcc not found; the CUDA variant needs the real nvcc")
        else:
            machine.append(stand_in_output(spec))
    return machine, activations


def build_outputs(recipes_dir: Path, recipes: list[tuple[str, list[dict]]], channel: Path,
                  log=print, package_format: str = "conda:1") -> list[str]:
    """Build each (name, outputs) recipe with rattler-build into `channel` (indexed first, so
    later recipes can use earlier ones); returns the package file names built."""
    from rattler_build import Stage0Recipe, ToolConfiguration

    index_channel(channel)
    built: list[str] = []
    for name, outputs in recipes:
        if not outputs:
            continue
        folder = recipes_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "recipe.yaml").write_text(multi_output_recipe(name, outputs))
        log(f"toolchain: building {len(outputs)} package(s) of {name}")
        recipe_obj = Stage0Recipe.from_file(folder / "recipe.yaml")
        for result in recipe_obj.run_build(tool_config=ToolConfiguration(test_strategy="skip", compression_threads=2),
                                           output_dir=channel, channels=[str(channel)],
                                           package_format=package_format):
            built += [Path(p).name for p in result.packages]
    return built
