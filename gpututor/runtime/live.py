"""What is running in this process and must be stopped before it exits: live ``%ranks`` groups
and runs.

Each registers itself when it starts (``RankGroup``, ``Run``); the lessons' kernel calls
:func:`stop_all` when it is asked to shut down (runtime/kernel.py), before it stops the
forkserver. The registry holds weak references: an object the notebook has dropped is not kept
alive by it, and its own finalizer has already cleaned up.
"""
from __future__ import annotations

import threading
import weakref

_live: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()
_lock = threading.Lock()
_next = 0


def register(obj) -> None:
    """Remember ``obj`` (anything with a ``stop()`` method) until it is stopped or collected."""
    global _next
    with _lock:
        _live[_next] = obj
        _next += 1


def stop_all() -> list[BaseException]:
    """``stop()`` every registered object that is still alive, oldest first, each once; return
    the errors raised on the way (one failing ``stop`` does not keep the others running)."""
    with _lock:
        objects = [obj for _, obj in sorted(_live.items(), key=lambda item: item[0])]
        _live.clear()
    errors = []
    for obj in objects:
        try:
            obj.stop()
        except Exception as exc:  # noqa: BLE001 - the others must still be stopped
            errors.append(exc)
    return errors
