"""A group's rank processes: starting one, waiting until it joined, and ending them all.

``group.py`` keeps the lists these functions fill and empty (processes, the kernel's ends of the
pipes, the ``alive`` pipes) and hands them to :func:`teardown` through ``weakref.finalize``, so
the ranks end on every path: ``stop()``, a failed start, garbage collection, the kernel's exit.
"""
from __future__ import annotations

import pickle
import shutil
import time

from .replies import receive

START_TIMEOUT_S = 120.0   # joining the group (the forkserver's first imports may take a while)


def start_rank(ctx, rank: int, world_size: int, spec, tmp: str) -> tuple:
    """Start rank ``rank`` from the multiprocessing context ``ctx``; return its process, the
    kernel's end of its pipe and the writing end of its ``alive`` pipe."""
    from .rank import rank_main
    ours, theirs = ctx.Pipe(duplex=True)
    alive_reader, alive_writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=rank_main, name=f"gpututor-ranks-{rank}", daemon=True,
                       args=(rank, world_size, spec, tmp, theirs, alive_reader))
    proc.start()
    theirs.close(), alive_reader.close()
    return proc, ours, alive_writer


def joined_pid(rank: int, conn, proc) -> int:
    """Wait until ``rank`` says it joined the process group; return its pid (its first
    message), or raise ``RuntimeError`` with why it could not join."""
    reply = receive(conn, proc, START_TIMEOUT_S)
    if reply[0] != "ready":
        raise RuntimeError(f"rank {rank} could not join the group: {reply[2]}\n"
                           + (reply[3] if len(reply) > 3 else ""))
    return reply[2][0]


def teardown(procs: list, conns: list, alive: list, tmp: str) -> None:
    """Ask each rank to stop, then make sure: terminate, kill; close the pipes; remove ``tmp``."""
    for conn in conns:
        try:
            conn.send_bytes(pickle.dumps(("stop",)))
        except OSError:
            pass
    deadline = time.monotonic() + 2.0
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(2.0)
        if proc.is_alive():
            proc.kill()
            proc.join(2.0)
    for pipe in conns + alive:
        pipe.close()
    procs.clear(), conns.clear(), alive.clear()
    shutil.rmtree(tmp, ignore_errors=True)
