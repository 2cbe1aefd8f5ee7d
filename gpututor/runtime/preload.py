"""What the ranks' forkserver imports before it forks the first rank: the worker, caught.

multiprocessing's forkserver imports its preload list itself and swallows only ImportError: any
other exception (a corpus file missing from an install, say) kills the forkserver, and every
later ``proc.start()`` fails with a bare ``EOFError``. Imported through this module instead, a
failing worker import leaves the forkserver alive; each rank then imports the worker again
(runtime/launcher.py ``_rank_entry``), fails the same way and reports it, traceback included,
like any other failing rank. ``FAILED`` keeps the forkserver's own traceback.
"""
from __future__ import annotations

import traceback

FAILED: str | None = None

try:
    import gpututor.runtime.worker  # noqa: F401 - imported for the ranks that are forked from here
except BaseException:  # noqa: BLE001 - reported by each rank instead, with its traceback
    FAILED = traceback.format_exc()
