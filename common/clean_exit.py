"""How a command ends once its outcome is known, where a Rust extension's runtime is loaded
(py-rattler, py-rattler-build): without the interpreter's finalization.

Why: py-rattler hands an awaited result back from a tokio thread (pyo3-async-runtimes'
set_result calls loop.call_soon_threadsafe). That call wakes the event loop, so the main thread
can print the command's line and start finalizing while the tokio thread still holds Python
objects. When that thread takes the GIL back during finalization, CPython (3.11 to 3.13) ends
it with pthread_exit; the forced unwind runs Rust's drops of those objects without the GIL,
beside the final garbage collection: SIGSEGV, or SIGABRT from PyGILState_Release ("Python
runtime state: finalizing"). docs/upstream/py-rattler-exit-crash.md has the backtrace, the
reproduction and the numbers.

So, where such a module is loaded: the atexit handlers run, stdout and stderr are flushed,
then os._exit ends the process with the command's status; there is no finalization for
another thread to race. Elsewhere a command exits as usual. Standard library only.
"""
from __future__ import annotations

import atexit
import os
import sys
import traceback
from typing import Callable, NoReturn

# extension modules that run a tokio runtime whose threads call back into Python
RUNTIME_MODULES = ("rattler", "rattler_build")
EXIT_INTERRUPTED = 130
EXIT_FLUSH_FAILED = 120   # what CPython exits with when flushing stdout fails at exit


def runtime_loaded() -> bool:
    return any(name in sys.modules for name in RUNTIME_MODULES)


def status_of(code: object) -> int:
    """The exit status SystemExit(code) gives: None is 0, a non-int is printed and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def finish(code: object) -> NoReturn:
    """End the process with `code`, as SystemExit would, skipping finalization where a Rust
    runtime is loaded."""
    if not runtime_loaded():
        raise SystemExit(code)
    status = status_of(code)
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_functions is not None:
        run_exit_functions()   # logging's flush, weakref.finalize (TemporaryDirectory), ...
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):   # a closed pipe (`| head`), a closed stream
            if stream is sys.stdout and status == 0:
                status = EXIT_FLUSH_FAILED
    os._exit(status)


def run_command(main: Callable[[], object]) -> NoReturn:
    """Run a command's main() and finish() with its status; an uncaught exception is printed as
    the interpreter prints it (1, or 130 for an interrupt)."""
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:
        if not runtime_loaded():
            raise
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        code = EXIT_INTERRUPTED if isinstance(exc, KeyboardInterrupt) else 1
    finish(code)
