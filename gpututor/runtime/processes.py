"""One attempt's rank processes: started from the forkserver, and ended so that none is left.

Each rank holds the read end of a pipe from the kernel (its ``control``) and exits when it closes
(worker.py ``_exit_when_parent_goes``): closing the pipes ends the ranks, and whatever is still
alive a few seconds later is terminated, then killed. Each rank also holds the only write end of
its record pipe (rank_output.RecordPipe): what it reports goes there, and the kernel reads its
end as closed once the rank has exited, however it exited.
"""
from __future__ import annotations

import pickle
import time
import traceback as tb

import psutil

from . import warm as _warm


def start_ranks(ctx, spec, payload: bytes, store_path: str, start_time: float
                ) -> tuple[list, list, list]:
    """Start one process per rank of ``spec`` (``payload``: ``cloudpickle.dumps((spec, task))``),
    meeting through the file store ``store_path``. Returns the processes, the write ends of their
    control pipes and the read ends of their record pipes (one per rank: what a rank sends, and
    its end when it exits); on any failure, what was already started is ended and closed before
    the error goes on."""
    procs, controls, readers = [], [], []
    try:
        for rank in range(spec.world_size):
            control_reader, control = ctx.Pipe(duplex=False)
            reader, writer = ctx.Pipe(duplex=False)
            controls.append(control), readers.append(reader)
            proc = ctx.Process(target=_rank_entry, name=f"gpututor-rank{rank}",
                               args=(payload, rank, spec.world_size, store_path, writer,
                                     control_reader, start_time), daemon=True)
            try:
                proc.start()
            except EOFError as exc:  # the forkserver died before it could fork the rank
                raise RuntimeError(
                    "the ranks' forkserver died while starting: it imports "
                    + ", ".join(_warm.PRELOAD) + " first. Run `python -c 'import "
                    "gpututor.runtime.worker'` in this environment to see the error") from exc
            finally:
                # only the rank holds these ends now: its exit is the end of its record pipe
                control_reader.close(), writer.close()
            procs.append(proc)
    except BaseException:
        terminate_ranks(procs, controls)
        close_all(readers)
        procs.clear()
        raise
    return procs, controls, readers


def terminate_ranks(procs: list, controls: list) -> None:
    """End every rank: close the control pipes (each rank exits by itself), then terminate what
    is left, and kill what is still alive 3 s later."""
    close_all(controls)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + 3
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=2)


def release_ranks(procs: list) -> None:
    """Let go of ended rank processes: each one's handle (its sentinel fd) is closed."""
    for proc in procs:
        try:
            proc.close()
        except ValueError:   # still running (it could not be killed): leave its handle open
            pass


def cpu_seconds(proc) -> float | None:
    """The CPU time ``proc`` used so far (user + system), or None if it cannot be read."""
    try:
        times = psutil.Process(proc.pid).cpu_times()
        return times.user + times.system
    except (psutil.Error, TypeError, ValueError):
        return None


def close_all(pipes: list) -> None:
    """Close each pipe end (one already closed is fine)."""
    for pipe in pipes:
        try:
            pipe.close()
        except OSError:
            pass


def _rank_entry(payload, rank, world_size, store_path, writer, control, start_time) -> None:
    from .rank_output import RecordPipe
    records = RecordPipe(writer)
    try:  # the forkserver has it preloaded (runtime/preload.py), unless that import failed
        from .worker import rank_main
    except BaseException as exc:  # noqa: BLE001 - e.g. a corpus missing from an install
        records.put(("error", rank, {
            "type": type(exc).__name__,
            "message": f"the rank could not import gpututor's worker: {exc}",
            "traceback": tb.format_exc()}))
        raise SystemExit(1)
    rank_main(payload, rank, world_size, store_path, records, control, start_time)


def exited_unfinished(procs: list, open_pipes: dict, finished: set) -> int | None:
    """The first rank that exited without reporting its end, once all it sent has been read:
    its record pipe (``open_pipes[rank]`` until it ended) ended, or is quiet after it failed."""
    for rank, proc in enumerate(procs):
        if proc.exitcode is None or rank in finished:
            continue
        pipe = open_pipes.get(rank)
        if pipe is None or (proc.exitcode != 0 and not pipe.poll()):
            return rank
    return None


def receive(reader, rank: int):
    """The next message on ``rank``'s record pipe; None once the rank's end is closed (it
    exited, perhaps killed in the middle of a message). A message that cannot be unpickled here
    becomes that rank's error."""
    try:
        data = reader.recv_bytes()
    except (EOFError, OSError):   # OSError: "got end of file during message"
        return None
    try:
        return pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - e.g. a record holding a class only the rank has
        return ("error", rank, {"type": type(exc).__name__, "traceback": tb.format_exc(),
                                "message": f"the kernel could not read what rank {rank} sent: "
                                           f"{exc}"})
