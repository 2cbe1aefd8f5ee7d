"""``python -m gpututor ...``: the command line (gpututor.runtime.cli)."""
import sys

from .runtime.cli import main

if __name__ == "__main__":
    sys.exit(main())
