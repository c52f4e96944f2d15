"""Write torch_version.h, only when its content changes (so dependents do not rebuild)."""
import sys
from pathlib import Path

from torchgen.packaged.helpers import version_header


def main(out: str) -> None:
    path = Path(out)
    text = version_header()
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


if __name__ == "__main__":
    main(sys.argv[1])
