"""What went wrong in a run, said so that a person can act on it: which rank, at which step, why.

The launcher's collector (runtime/launcher.py) calls these when a rank reports an error, dies
without a word, or stops answering. A rank that gave up waiting for a peer is not the cause: the
peer that stopped answering is named, with what its main thread was doing (its stack, which it
writes on request: rank_output.dump_stack_on_request).
"""
from __future__ import annotations

import os
import signal
import time
from multiprocessing import connection
from typing import Callable

from .processes import cpu_seconds
from .rank_output import STACK_SIGNAL, main_thread_stack


class RunFailed(RuntimeError):
    """A rank failed; the message names the rank and carries its traceback."""

    def __init__(self, message: str, rank: int | None = None, traceback: str = "",
                 step: int | None = None, failed_rank: int | None = None, cause: str = "",
                 error: BaseException | None = None):
        super().__init__(message + (f"\n\n--- traceback of rank {rank} ---\n{traceback}"
                                    if traceback else ""))
        self.rank, self.rank_traceback, self.step = rank, traceback, step
        # the rank at fault, where it is not the one whose traceback this is (a rank that gave
        # up waiting for a peer that stopped answering), and what went wrong, in one line
        self.failed_rank = rank if failed_rank is None else failed_rank
        self.cause = cause or (message.splitlines() or [""])[0]
        # the rank's own error where it travels with its fields (a DeviceOutOfMemory), else None
        self.error = error


def died(spec, rank: int, exitcode: int) -> dict:
    """What to say of a rank that died without telling the collector why. On CUDA, a rank
    killed by SIGABRT is what NCCL's watchdog does to a rank whose collective timed out
    (torch.distributed docs, ``TORCH_NCCL_ASYNC_ERROR_HANDLING``): it waited for a peer, so
    it is reported as a timeout and the peer that stopped answering is named."""
    message = f"rank {rank} exited with code {exitcode}"
    if exitcode == -signal.SIGABRT and spec.resolved_device() == "cuda":
        message += (" (SIGABRT: NCCL's watchdog aborts a rank whose collective timed out "
                    "waiting for a peer)")
    return {"type": "ProcessDied", "message": message, "traceback": ""}


def rank_failed(spec, rank: int, body: dict, last_step: dict, finished: set,
                stack_of: Callable[[int], tuple[str, str]]) -> RunFailed:
    """The failure ``rank`` reported (``body``: its error's type, message and traceback), given
    each rank's last step and the ranks that finished; ``stack_of(rank)`` asks a live rank for
    its stack."""
    step = last_step[rank] + 1
    cause = f"{body['type']}: " + (body["message"].splitlines() or [""])[0]
    own = f"rank {rank} failed at step {step}: {body['type']}: {body['message']}"
    text = (body["message"] + body["traceback"]).lower()
    others = [r for r in range(spec.world_size) if r != rank and r not in finished]
    behind = [r for r in others if last_step[r] < last_step[rank]] or others
    if ("timeout" in text or "timed out" in text) and behind:
        # The root cause is the rank that stopped answering, not the one that gave up on it.
        silent = behind[0]
        where, stack = stack_of(silent)
        message = (f"rank {silent} stopped answering at step {last_step[silent] + 1}{where}; "
                   f"rank {rank} gave up waiting for it after timeout={spec.timeout} s"
                   f"\nrank {rank}: {cause}"
                   + "".join(f"\nrank {r}: no record after step {last_step[r]}"
                             for r in behind[1:]) + stack)
        return RunFailed(message, rank, body["traceback"], step=last_step[silent] + 1,
                         failed_rank=silent, cause=f"stopped answering (rank {rank} gave up "
                         f"waiting for it after timeout={spec.timeout} s)")
    return RunFailed(own, rank, body["traceback"], step=step, cause=cause, error=body.get("error"))


def silent_failure(spec, rank: int, last_step: dict,
                   stack_of: Callable[[int], tuple[str, str]]) -> RunFailed:
    """A rank that sent no record and used no CPU time for longer than the spec's timeout."""
    where, stack = stack_of(rank)
    quiet = f"no record and no CPU time used for more than timeout={spec.timeout} s"
    message = (f"rank {rank} stopped answering at step {last_step[rank] + 1}{where}: {quiet} "
               f"(last record: step {last_step[rank]})" + stack)
    return RunFailed(message, rank, step=last_step[rank] + 1, cause=f"stopped answering: {quiet}")


def silent_rank(spec, procs: list, finished: set, last_seen: dict, last_step: dict,
                cpu_seen: dict, startup_grace_s: float) -> int | None:
    """The first unfinished rank that sent nothing for longer than the spec's timeout (plus
    ``startup_grace_s`` before its first record) and used no CPU time meanwhile. A long step (a
    big model's first, autotuning) keeps using CPU time and a rank that hangs does not: only the
    second is reported; the first has its clock (``last_seen``, ``cpu_seen``) moved on."""
    now = time.monotonic()
    for rank in range(spec.world_size):
        allowed = spec.timeout + (startup_grace_s if last_step[rank] < 0 else 5.0)
        if rank in finished or now - last_seen[rank] <= allowed:
            continue
        cpu = cpu_seconds(procs[rank])
        if cpu is not None and cpu_seen[rank] is not None and \
                cpu - cpu_seen[rank] > 0.05 * allowed:
            last_seen[rank], cpu_seen[rank] = now, cpu
            continue
        return rank
    return None


def stack_of(pid: int, folder: str, rank: int) -> tuple[str, str]:
    """``(" (in FILE line N, FUNC)", the stack as text)`` of a live rank's main thread, which it
    writes on request into ``folder`` (rank_output.dump_stack_on_request); empty if it cannot."""
    path = os.path.join(folder, f"stack-rank{rank}.txt")
    try:
        os.kill(pid, STACK_SIGNAL)
    except (OSError, TypeError):
        return "", ""
    deadline, frames = time.monotonic() + 1.0, []
    while time.monotonic() < deadline and not frames:
        time.sleep(0.05)
        try:
            with open(path) as f:
                frames = main_thread_stack(f.read())
        except OSError:
            pass
    if not frames:
        return "", ""
    ours = next((f for f in frames if "gpututor" in f), frames[0])
    where = " (in " + ours.replace("File ", "").replace('"', "") + ")"
    return where, (f"\n\n--- what rank {rank} was doing (its main thread, innermost "
                   "first) ---\n" + "\n".join(frames))


def killed_peers(procs, rank: int, body: dict, finished: set, grace_s: float) -> list[int]:
    """The ranks other than ``rank`` (whose error is ``body``) that a signal killed. A killed
    rank's sockets close while it exits, so its partner can report "connection reset" a moment
    before the killed process can be reaped: for an error that names a lost connection, wait up
    to ``grace_s`` for another rank to exit before blaming the one that reported."""
    def killed():
        return [r for r, p in enumerate(procs)
                if r != rank and (p.exitcode or 0) < 0 and r not in finished]

    def running():
        return [p.sentinel for r, p in enumerate(procs)
                if r != rank and r not in finished and p.exitcode is None]
    text = str(body.get("message", "")) + str(body.get("traceback", ""))
    if not killed() and "connection" in text.lower():
        deadline = time.monotonic() + grace_s
        while not killed() and time.monotonic() < deadline:
            waiting = running()   # read once: a rank reaped meanwhile must not leave wait([])
            if not waiting:       # to sleep out the whole grace
                break
            if connection.wait(waiting, timeout=max(deadline - time.monotonic(), 0)):
                # a sentinel ends as the process exits, a moment before it can be reaped
                time.sleep(0.001)
    return killed()
