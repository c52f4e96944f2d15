"""``python -m feedstock <subcommand>``."""
from common.terminal import printable_anywhere

printable_anywhere()  # before anything prints: an ASCII terminal (LC_ALL=C) gets escapes, not a traceback
try:
    from common.child_lifetime import tie_children
    from common.clean_exit import run_command
    from common.interrupts import raise_interrupt, take_interrupts
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the modules load: nothing has started, nothing to undo
    import sys

    print("error: interrupted (Ctrl-C) before anything started; nothing was written", file=sys.stderr)
    raise SystemExit(130) from None

tie_children()   # what this command starts ends with it, even after a kill -9
take_interrupts(raise_interrupt)   # a hangup (a closed terminal) stops a command as Ctrl-C does
# py-rattler's threads must not outlive the interpreter's finalization (common/clean_exit.py)
run_command(main)
