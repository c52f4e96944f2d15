"""``python -m feedstock <subcommand>``."""
from .cli import main

raise SystemExit(main())
