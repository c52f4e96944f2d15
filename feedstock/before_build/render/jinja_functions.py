"""The Jinja2 functions conda-build offers in meta.yaml, computed from a variant (no solver).

``pin_compatible`` has no environment to look at here, so it pins against the variant's value
for the package when the variant has one (``numpy`` -> ``numpy >=2.0,<3.0a0``), else it returns
the bare name, which is what conda-build itself renders before solving.
"""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

from ...errors import FeedstockError
from ...platforms import DEFAULT_COMPILERS, Platform
from ...text_input import read_text


def _increment(part: Any, alpha_next: bool) -> str:
    try:
        return str(int(part) + 1) + ("a" if alpha_next else ".0a0")
    except ValueError:
        return chr(ord(str(part)) + 1)


def _version_parts(version: str) -> list[str]:
    # "2.13.0" -> ["2", "13", "0"]; "1.1.1k" -> ["1", "1", "1", "k"] (conda splits letters off)
    parts: list[str] = []
    for piece in version.replace("_", ".").split("."):
        parts += [p for p in re.split(r"(\d+)", piece) if p]
    return parts


def pin_range(version: str, min_pin: str | None = "x.x.x.x.x.x", max_pin: str | None = "x") -> str:
    """``>=low,<high`` for ``version`` given conda-build pin expressions (``max_pin='x.x'``)."""
    parts = _version_parts(version.rstrip("*").rstrip("."))
    bounds = []
    if min_pin:
        count = len(min_pin.split("."))
        bounds.append(">=" + ".".join(parts[:count]))
    if max_pin:
        count = min(len(max_pin.split(".")), len(parts))
        upper = parts[:count]
        alpha_next = count < len(parts) and parts[count].isalpha()
        upper[-1] = _increment(upper[-1], alpha_next)
        bounds.append("<" + ".".join(upper))
    return ",".join(bounds)


# pin_subpackage() in a first render pass: a token that resolve_pin_tokens() replaces once every
# output's version and build string are known (saves rendering the recipe twice)
DEFERRED_PINS: Mapping[str, tuple[str, str]] = {"<deferred>": ("", "")}
_PIN_TOKEN = re.compile(r"PINSUBPACKAGE__([A-Za-z0-9_.\-]+?)__([x.]*)__([x.]*)__([01])__END")


def resolve_pin_tokens(text: str, subpackages: Mapping[str, tuple[str, str]]) -> str:
    """Replace the pin tokens in ``text`` with real pins (``libtorch 2.13.0 cpu_mkl_h..._100``)."""
    def pin(match: re.Match) -> str:
        name, min_pin, max_pin, exact = match.groups()
        return subpackage_pin(name, subpackages, min_pin, max_pin, exact == "1")
    return _PIN_TOKEN.sub(pin, text) if "PINSUBPACKAGE__" in text else text


def subpackage_pin(name: str, subpackages: Mapping[str, tuple[str, str]], min_pin: str | None,
                   max_pin: str | None, exact: bool) -> str:
    """What pin_subpackage() renders once every output's (version, build string) is known."""
    if name not in subpackages:
        raise FeedstockError(f"pin_subpackage('{name}') names no output of this recipe; "
                             "use pin_compatible for other packages")
    version, build_string = subpackages[name]
    if exact:
        return f"{name} {version} {build_string}"
    return f"{name} {pin_range(version, min_pin, max_pin)}"


def _target_spec(platform: Platform, variant: Mapping[str, Any], language: str, kind: str) -> str:
    """compiler('c') / stdlib('c'): the package for the target, with the variant's version."""
    target = str(variant.get("target_platform", platform.subdir))
    default = DEFAULT_COMPILERS.get(platform.os, {}).get(language, language) if kind == "compiler" else language
    package = variant.get(f"{language}_{kind}", default)
    version = variant.get(f"{language}_{kind}_version")
    spec = f"{package}_{target}"
    if version:
        version = str(version)
        if re.fullmatch(r"[0-9][0-9a-zA-Z_.]*", version) and not version.endswith("*"):
            version += ".*"  # conda-build makes a bare version a prefix match
        spec += f" {version}"
    return spec


def _cdt(platform: Platform, variant: Mapping[str, Any], package: str) -> str:
    arch = platform.arch
    name = "cos7" if arch in ("aarch64", "ppc64le", "ppc64", "s390x") else "cos6"
    cdt_arch = arch if name == "cos7" else ("x86_64" if arch == "64" else "i686")
    name = variant.get("cdt_name", name)
    cdt_arch = variant.get("cdt_arch", cdt_arch)
    base, _, rest = package.partition(" ")
    return f"{base}-{name}-{cdt_arch}" + (f" {rest}" if rest else "")


def _pin_subpackage(subpackages: Mapping[str, tuple[str, str]] | None, name: str, min_pin: str = "x.x.x.x.x.x",
                    max_pin: str = "x", exact: bool = False) -> str:
    if subpackages is None:
        return name
    if subpackages is DEFERRED_PINS:
        return f"PINSUBPACKAGE__{name}__{min_pin or ''}__{max_pin or ''}__{int(bool(exact))}__END"
    return subpackage_pin(name, subpackages, min_pin, max_pin, bool(exact))


def _pin_compatible(variant: Mapping[str, Any], name: str, lower_bound: str | None = None,
                    upper_bound: str | None = None, min_pin: str = "x.x.x.x.x.x", max_pin: str = "x",
                    exact: bool = False) -> str:
    version = lower_bound or variant.get(name.replace("-", "_"))
    if not version:
        return name
    version = str(version).split(" ")[0]
    if upper_bound:
        return f"{name} >={version},<{upper_bound}"
    if exact:
        return f"{name} {version}"
    return f"{name} {pin_range(version, min_pin, max_pin)}"


def _load_file_regex(recipe_dir: Path, load_file: str, regex_pattern: str, from_recipe_dir: bool = False,
                     recipe_dir_: str | None = None, config: Any = None):
    path = recipe_dir / load_file if from_recipe_dir else recipe_dir.parent / load_file
    if not path.is_file():
        return None
    # the bounded reader of every input: no device, no FIFO, no file beyond the size limit
    return re.search(regex_pattern, read_text(path, str(load_file)))


def make_functions(platform: Platform, variant: Mapping[str, Any], recipe_dir: Path,
                   subpackages: Mapping[str, tuple[str, str]] | None) -> dict[str, Callable]:
    """compiler(), stdlib(), cdt(), pin_subpackage(), pin_compatible(), load_file_regex()...

    ``subpackages`` maps output name -> (version, build string) once they are known; before
    that, pin_subpackage returns the bare name (conda-build's first pass does the same).
    """
    return {
        "compiler": partial(_target_spec, platform, variant, kind="compiler"),
        "stdlib": partial(_target_spec, platform, variant, kind="stdlib"),
        "cdt": partial(_cdt, platform, variant),
        "pin_subpackage": partial(_pin_subpackage, subpackages),
        "pin_compatible": partial(_pin_compatible, variant),
        "load_file_regex": partial(_load_file_regex, recipe_dir),
        "ccache": lambda method: "ccache",
    }
