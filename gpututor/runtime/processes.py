"""One attempt's rank processes: started from the forkserver, and ended so that none is left.

Each rank holds the read end of a pipe from the kernel (its ``control``) and exits when it closes
(worker.py ``_exit_when_parent_goes``): closing the pipes ends the ranks, and whatever is still
alive a few seconds later is terminated, then killed.
"""
from __future__ import annotations

import time
import traceback as tb

from . import warm as _warm


def start_ranks(ctx, spec, payload: bytes, store_path: str, queue, start_time: float
                ) -> tuple[list, list]:
    """Start one process per rank of ``spec`` (``payload``: ``cloudpickle.dumps((spec, task))``),
    meeting through the file store ``store_path`` and reporting to ``queue``. Returns the
    processes and the write ends of their control pipes; on any failure, the ones already
    started are ended before the error goes on."""
    procs, controls = [], []
    try:
        for rank in range(spec.world_size):
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_rank_entry, name=f"gpututor-rank{rank}",
                               args=(payload, rank, spec.world_size, store_path, queue, reader,
                                     start_time), daemon=True)
            try:
                proc.start()
            except EOFError as exc:  # the forkserver died before it could fork the rank
                raise RuntimeError(
                    "the ranks' forkserver died while starting: it imports "
                    + ", ".join(_warm.PRELOAD) + " first. Run `python -c 'import "
                    "gpututor.runtime.worker'` in this environment to see the error") from exc
            reader.close()
            procs.append(proc)
            controls.append(writer)
    except BaseException:
        terminate_ranks(procs, controls)
        raise
    return procs, controls


def terminate_ranks(procs: list, controls: list) -> None:
    """End every rank: close the control pipes (each rank exits by itself), then terminate what
    is left, and kill what is still alive 3 s later."""
    for writer in controls:
        try:
            writer.close()
        except OSError:
            pass
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + 3
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=2)


def _rank_entry(payload, rank, world_size, store_path, queue, control, start_time) -> None:
    try:  # the forkserver has it preloaded (runtime/preload.py), unless that import failed
        from .worker import rank_main
    except BaseException as exc:  # noqa: BLE001 - e.g. a corpus missing from an install
        queue.put(("error", rank, {
            "type": type(exc).__name__,
            "message": f"the rank could not import gpututor's worker: {exc}",
            "traceback": tb.format_exc()}))
        raise SystemExit(1)
    rank_main(payload, rank, world_size, store_path, queue, control, start_time)
