"""The messages between the kernel and its ranks, and how a reply finds its request.

Every request the kernel sends carries a request id, a number that grows with each request
(``run`` and ``get`` alike), and every reply echoes it::

    kernel -> rank                              rank -> kernel
    ("run", request, cell, code, guarded)       ("done", request, outcome)
    ("get", request, name)                      ("value" | "missing" | "unpicklable", request, body)
    ("stop",)
                                                ("ready", 0, (pid, device))     once, at start
                                                ("failed", None, why, traceback)  then it exits

Why the id: a reply the kernel stopped waiting for (a request it gave up on, or one it had no
reason to read) stays in the pipe. Without ids the next request would read it as its own, and
every later cell would show the output of the one before. With ids such a reply is read and
dropped. A rank's death (``"died"``, made up here when its process exits or stays silent) and
``"failed"`` end every request, whatever it was.
"""
from __future__ import annotations

import pickle
import time
from multiprocessing import connection

DEATHS = ("died", "failed")


def receive(conn, proc, timeout: float) -> tuple:
    """The next message of a rank (its pipe ``conn``, its process ``proc``), whatever request it
    answers; ``("died", None, why)`` if the rank exits first or says nothing within ``timeout``."""
    ready = connection.wait([conn, proc.sentinel], timeout)
    if conn in ready:
        try:
            return pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            pass
    if not ready:
        return ("died", None, f"no answer within {timeout:.0f} s")
    proc.join(1)
    return ("died", None, f"it exited with code {proc.exitcode}")


def is_death(reply: tuple) -> bool:
    """Whether ``reply`` says the rank is gone (it answers no request any more)."""
    return reply[0] in DEATHS


def replies(conns: list, procs: list, pending: set, request: int, deadline: float):
    """Yield ``(rank, reply)`` for ``request`` as each rank of ``pending`` answers, and take that
    rank out of ``pending``; a rank that exits yields its death. Replies to other requests are
    read and dropped. Ends when ``pending`` is empty or at ``deadline`` (``time.monotonic()``):
    ``pending`` then holds the ranks that did not answer in time."""
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        waits = {conns[r]: r for r in pending}
        waits.update({procs[r].sentinel: r for r in pending})
        for handle in connection.wait(list(waits), timeout=min(0.5, left)):
            rank = waits[handle]
            if rank not in pending:
                continue
            reply = receive(conns[rank], procs[rank], 1.0)
            if is_death(reply) or reply[1] == request:
                pending.discard(rank)
                yield rank, reply
            # else: the answer to an earlier request, left in the pipe: dropped
