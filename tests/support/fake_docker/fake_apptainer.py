"""A recording stand-in for `apptainer` (it cannot be installed here: not in Debian bookworm,
not on PyPI or npm). Installed on PATH by the tests as `apptainer`; appends one JSON record per
call to $FAKE_APPTAINER_LOG:
  {"argv": [...], "secrets": {NAME: value of APPTAINERENV_NAME}, "plain_secrets": [...]}
`plain_secrets` lists secret names found in its own environment without the APPTAINERENV_
prefix (a real `apptainer exec --cleanenv` would not hand those to the container).

`exec` of a build writes the done-marker where the feedstock is bound (as a build that worked
would) unless FAKE_APPTAINER_EXIT is set, which it then exits with.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

FEEDSTOCK_TARGET = "/home/conda/feedstock_root"
SECRETS = ("BINSTAR_TOKEN", "ANACONDA_API_TOKEN", "FEEDSTOCK_COMPILE_CACHE_PASSWORD")


def option_values(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == option]


def main(argv: list[str]) -> int:
    record = {"argv": argv,
              "secrets": {k[len("APPTAINERENV_"):]: v for k, v in os.environ.items()
                          if k.startswith("APPTAINERENV_")},
              "plain_secrets": [name for name in SECRETS if name in os.environ]}
    with open(os.environ["FAKE_APPTAINER_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")
    if argv[:1] != ["exec"]:
        return 0
    if os.environ.get("FAKE_APPTAINER_EXIT"):
        print("fake apptainer: failing as asked", file=sys.stderr)
        return int(os.environ["FAKE_APPTAINER_EXIT"])
    binds = {parts[1]: parts[0] for parts in (b.split(":") for b in option_values(argv, "--bind"))}
    env = dict(e.split("=", 1) for e in option_values(argv, "--env"))
    artifacts = Path(binds[FEEDSTOCK_TARGET]) / "build_artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / env["DONE_MARKER"]).write_text("")
    print("::build-locally-step:: done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
