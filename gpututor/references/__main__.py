"""``python -m gpututor.references``: write docs/references.md."""
import sys

from . import main

sys.exit(main())
