"""Run as a script by the interpreter of a build step, never imported by the driver: CMake's
configure alone, through scikit-build-core's own code (the wheel build stopped after its
configure, the path its `sdist.cmake` setting takes; a private entry of scikit-build-core 1.x).

    python skbuild_configure.py --probe          exit 0 when the entry is there, 3 when not
    python skbuild_configure.py '<settings>'     configure with these config settings (JSON)

Run in the source tree with the backend's environment, as pip runs the backend.
"""
import inspect
import json
import os
import sys


def main(argv: list) -> int:
    # neither this folder (the driver's modules) nor the source tree is on the backend's path
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != here]
    try:
        from scikit_build_core.build.wheel import _build_wheel_impl
        available = "exit_after_config" in inspect.signature(_build_wheel_impl).parameters
    except (ImportError, TypeError, ValueError):
        available = False
    if argv[0] == "--probe":
        return 0 if available else 3
    _build_wheel_impl(None, json.loads(argv[0]), None, exit_after_config=True, editable=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
