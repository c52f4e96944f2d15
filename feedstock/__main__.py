"""``python -m feedstock <subcommand>``."""
try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the modules load: nothing has started, nothing to undo
    import sys

    print("error: interrupted (Ctrl-C) before anything started; nothing was written", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
