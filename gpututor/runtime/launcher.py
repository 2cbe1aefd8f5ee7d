"""``launch(spec)``: start one process per rank and hand back a :class:`Run` at once.

How it stays safe in a notebook (the traps are listed in docs/architecture.md):
- ranks start from a *forkserver* (never a plain fork of the kernel) that imports torch and the
  worker once, so every launch after the first starts in a fraction of a second;
- the rendezvous is a file in a fresh temp folder (no port to race for); gloo talks over
  loopback only; every collective has the spec's short timeout;
- a collector thread drains records while watching every rank: the first failure stops the
  others and is raised in the notebook with the failing rank's traceback;
- each rank holds the read end of a pipe from the kernel and exits when it closes, so no rank
  outlives ``stop()`` or its kernel. No signal handler of the kernel is touched;
- each rank reports on a pipe of its own (a rank killed mid-message ends its pipe only); a
  finished Run holds no pipe, process or folder (runtime/processes.py, scratch_dirs.py);
- with ``max_restarts=N`` a failure takes every rank of the attempt down the same way, and the
  collector starts fresh ranks (a new rendezvous folder and pipes) that resume from the last
  complete checkpoint this run wrote, up to N times (a refused rendezvous: restarts.py).
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import traceback as tb
from multiprocessing import connection

import cloudpickle

from . import warm as _warm
from .checkpoint_owner import claim_folder, clear_staging, new_run_id, release_folder
from .failures import (RunFailed, died, killed_peers, rank_failed, silent_failure, silent_rank,
                       stack_of)
from .launch_checks import check_launch
from .processes import (close_all, cpu_seconds, exited_unfinished, receive, release_ranks,
                        start_ranks, terminate_ranks)
from .restarts import peer_cause, restart, retry_rendezvous
from .scratch_dirs import new_scratch_dir
from .summary import summarize, unechoed

STARTUP_GRACE_S = 60.0   # a rank may take this long (beyond the spec's timeout) to first report
PEER_EXIT_GRACE_S = 2.0  # how long an error naming a lost connection waits for a killed peer to show


def _context(start_method: str):
    return _warm.context(start_method)


def warm_up(start_method: str = "forkserver", block: bool = False) -> None:
    """Start the forkserver (and its imports of torch and the worker) ahead of the first Run.
    In a Jupyter kernel ``import gpututor`` has already started it (gpututor/runtime/warm.py)."""
    if start_method != "forkserver":
        return
    if block:
        _warm.start_forkserver()
    else:
        _warm.start_in_background()


def launch(spec, start_method: str = "forkserver", task=None,
           max_restarts: int | None = None) -> "Run":
    """Start ``spec.world_size`` ranks training ``spec``; return a :class:`Run` immediately.

    ``max_restarts=N`` (or the spec's ``max_restarts``): when a rank dies, every rank of the
    attempt is stopped and fresh ones resume from the last complete checkpoint this run wrote
    (``checkpoint_every`` must be set; from ``spec.resume`` or step 0 if none was written yet),
    up to N times; ``inject_fault`` fires in the first attempt only. ``Run.failures`` and the
    summary's ``failures`` say what failed, at which step, and where the run resumed.

    ``task`` replaces the training loop with your own callable
    ``task(spec, rank, world_size, device, emit)`` (a benchmark, an exercise checker): a
    function, or an object (e.g. a small dataclass holding the task's own parameters). It is
    sent to the ranks with cloudpickle, so a function defined in a notebook cell works (it goes
    *by value*). Each ``emit(record)`` must carry ``"step"``. The run's summary is
    ``task.summarize(spec, records, status)`` if the task has that method, else the list of
    records. A task run uses only the spec's world size, device, threads, timeout and seed.
    """
    spec = check_launch(spec, start_method, task, max_restarts)
    return Run(spec, start_method, task)


class Run:
    """A running (or finished) training run. Iterate it for records as they arrive.

    ``status`` is one of "starting", "running", "restarting" (after a failure, with restarts
    left: ``failures`` says which rank failed where, and the step the ranks resumed from),
    "finished", "failed", "stopped". What the ranks
    print is kept in ``output`` as ``(rank, stream, line)`` and, while you iterate or wait,
    echoed to ``echo`` (default: this process's stdout, so the notebook cell shows it) as
    ``[rank R] line``; set ``echo = None`` to keep it quiet (the panel shows it in its log).
    """

    def __init__(self, spec, start_method: str = "forkserver", task=None):
        self.spec = spec
        self._task = task
        # a training run's summary is summarize()'s; a task's its own (a bound method of this
        # Run kept here would tie the Run into a cycle that holds its pipes until gc runs)
        self._summarize = None if task is None else \
            getattr(task, "summarize", lambda spec, records, status: list(records))
        self.records: list[dict] = []   # every attempt's, each tagged with its "attempt"
        self.status = "starting"
        self.error: RunFailed | None = None
        self.summary: dict | None = None
        self.launched_at = time.perf_counter()
        self.started_wall = time.time()   # checkpoints written since then are this run's
        # the run's id, in every checkpoint it writes; while it lives no other run may write
        # its checkpoint_dir (runtime/checkpoint_owner.py; given up in _end)
        self.run_id = new_run_id()
        if spec.checkpoint_every:
            claim_folder(spec.checkpoint_dir, self.run_id)
        self.first_record_at: float | None = None
        self.output: list[tuple[int, str, str]] = []
        self.echo = sys.stdout
        self._echoed = self._echoed_failures = self._echoed_notices = 0
        # each failure: the attempt it ended, the rank, the step, the error's first line, and
        # the step the next attempt resumed from (None where it ended the run)
        self.failures: list[dict] = []
        self.attempt = 1
        self._starts = 0   # rank groups started, retried rendezvous included (restarts.py)
        self.rendezvous_tries: dict[int, int] = {}   # attempt -> starts of its ranks, if > 1
        self.notices: list[str] = []   # what the launcher tells the notebook (a retry)
        self._cond = threading.Condition()
        self._end_lock = threading.Lock()
        self._tmp = new_scratch_dir()   # after sweeping the folders of killed kernels
        self._ctx = _context(start_method)
        self._procs, self._controls, self._readers = [], [], []
        try:
            self._start_ranks(spec)
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            release_folder(spec.checkpoint_dir, self.run_id)
            raise
        self._collector = threading.Thread(target=self._collect, name="gpututor-collector",
                                           daemon=True)
        self._collector.start()
        from .live import register; register(self)  # noqa: E702 - the kernel's shutdown stops it

    def _start_ranks(self, spec) -> None:
        """Start this attempt's ranks, with a rendezvous folder and pipes of their own: nothing
        of an earlier attempt (a message half-sent by a rank that was killed, a stale store
        file, a stack dump) can reach them."""
        self._starts += 1
        self.attempt_spec = spec   # what a retried rendezvous starts again
        self._folder = os.path.join(self._tmp, f"attempt{self.attempt}-{self._starts}")
        os.mkdir(self._folder)
        # a record's "time" counts from the run's start, across attempts
        start = time.time() if self.attempt == 1 else self.started_wall
        self._procs, self._controls, self._readers = start_ranks(
            self._ctx, spec, cloudpickle.dumps((spec, self._task)), self._folder + "/store", start)
        self.pids = [p.pid for p in self._procs]   # this attempt's ranks, also once released

    # ---- what a notebook calls ---------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.status in ("finished", "failed", "stopped")

    def __iter__(self):
        """Yield records as they arrive, until the run ends (then raise if it failed). An
        interrupt (Ctrl-C, the kernel's stop button) while iterating stops every rank."""
        seen = 0
        try:
            while True:
                with self._cond:
                    while seen == len(self.records) and not self.done:
                        self._cond.wait(0.5)
                        self._echo_new()
                    batch, finished = self.records[seen:], self.done
                self._echo_new()
                seen += len(batch)
                yield from batch
                if finished and seen == len(self.records):
                    break
        except KeyboardInterrupt:
            self.stop()
            raise
        self._echo_new()
        if self.error is not None:
            raise self.error

    def wait(self, timeout: float | None = None) -> dict:
        """Block until the run ends; return the summary or raise :class:`RunFailed`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            with self._cond:
                while not self.done:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError(f"run still {self.status} after {timeout} s")
                    self._cond.wait(0.2 if left is None else min(left, 0.2))
                    self._echo_new()
        except KeyboardInterrupt:  # kernel interrupt: take the ranks down with us
            self.stop()
            raise
        # the collector closes the pipes last: when wait() returns, nothing of the run is open
        if threading.current_thread() is not self._collector:
            self._collector.join(timeout=5)
        self._echo_new()
        if self.error is not None:
            raise self.error
        return self.summary

    def _echo_new(self) -> None:
        """Print what arrived since the last call to ``echo`` (summary.unechoed says what)."""
        text = unechoed(self)
        if self.echo is not None and text:
            self.echo.write(text)
            self.echo.flush()

    def stop(self) -> None:
        """Cancel the run: every rank is gone when this returns (within a few seconds)."""
        self._end("stopped")
        self._collector.join(timeout=5)

    def __repr__(self) -> str:
        return (f"<Run {self.spec.strategy} x{self.spec.world_size} {self.status}, "
                f"{len(self.records)} records>")

    # ---- the collector thread ----------------------------------------------------------------
    def _collect(self) -> None:
        """Follow each attempt until it ends; after a failure, restart or end the run."""
        try:
            while not self.done:
                failure = self._watch()
                if failure is None or self.done:
                    break
                if retry_rendezvous(self, failure):   # a refused loopback connection: again
                    continue
                failure = self._restart(failure)
                if failure is not None:
                    self._end("failed", failure)
        finally:
            self._end("failed" if self.error else "stopped")
            # Only this thread reads the pipes, so only it closes them: closing them in _end()
            # from stop()'s thread would race with a read here ("OSError: handle is closed").
            self._release_attempt()

    def _watch(self) -> "RunFailed | None":
        """Drain this attempt's records while watching its ranks. Returns the failure that
        ended it, or None when it finished (the run ends) or the run was stopped."""
        spec, world = self.spec, self.spec.world_size
        finished, last_seen = set(), {r: time.monotonic() for r in range(world)}
        last_step = {r: -1 for r in range(world)}
        cpu_seen = {r: cpu_seconds(self._procs[r]) for r in range(world)}
        open_pipes = dict(enumerate(self._readers))   # rank -> its record pipe, until it ends
        while not self.done:
            running = [p.sentinel for p in self._procs if p.exitcode is None]
            ready = connection.wait(list(open_pipes.values()) + running, timeout=0.2)
            for rank, reader in list(open_pipes.items()):
                if self.done or reader not in ready:
                    continue
                message = receive(reader, rank)
                if message is None:   # the rank exited: its pipe is closed
                    del open_pipes[rank]
                    continue
                kind, rank, body = message
                if kind == "output":   # a line a rank printed: not a sign of progress
                    with self._cond:
                        self.output.append((rank, body["stream"], body["text"]))
                        self._cond.notify_all()
                    continue
                last_seen[rank] = time.monotonic()
                if kind == "record":
                    last_step[rank] = body["step"]
                    self._add({**body, "attempt": self.attempt})
                elif kind == "done":
                    finished.add(rank)
                else:
                    # a peer's error or death is the cause of its partner's "connection closed"
                    rank, body = peer_cause(self, open_pipes, rank, body, PEER_EXIT_GRACE_S)
                    killed = killed_peers(self._procs, rank, body, finished, PEER_EXIT_GRACE_S)
                    if killed:
                        rank, body = killed[0], self._died(killed[0],
                                                           self._procs[killed[0]].exitcode)
                    return self._fail(rank, body, last_step, finished)
            if self.done:
                return None
            if len(finished) == world:
                self._end("finished")
                return None
            dead = exited_unfinished(self._procs, open_pipes, finished)
            if dead is not None:
                return self._fail(dead, self._died(dead, self._procs[dead].exitcode), last_step,
                                  finished)
            silent = silent_rank(spec, self._procs, finished, last_seen, last_step, cpu_seen,
                                 STARTUP_GRACE_S)
            if silent is not None and not self.done:
                return self._fail_silent(silent, last_step)
        return None

    def _restart(self, failure: RunFailed) -> "RunFailed | None":
        return restart(self, failure)

    def _add(self, record: dict) -> None:
        with self._cond:
            if self.first_record_at is None:
                self.first_record_at = time.perf_counter()
            if self.status in ("starting", "restarting"):
                self.status = "running"
            self.records.append(record)
            self._cond.notify_all()

    def _end(self, status: str, error: "RunFailed | None" = None) -> None:
        """End the run once: take every rank down, summarise, then tell waiters."""
        with self._end_lock:
            if self.done:
                return
            if error is not None:
                self.error = error
            try:
                terminate_ranks(self._procs, self._controls)
                try:
                    summary = summarize(self.spec, self.records, status, self.failures,
                                        self.attempt) if self._summarize is None else \
                        self._summarize(self.spec, self.records, status)
                except Exception as exc:  # noqa: BLE001 - the run must end, and say why
                    summary, status = None, "failed"
                    self.error = self.error or RunFailed(
                        f"the ranks ended ({len(self.records)} records), but summarizing the "
                        f"run failed: {type(exc).__name__}: {exc}", None, tb.format_exc())
            finally:
                shutil.rmtree(self._tmp, ignore_errors=True)
                if self.spec.checkpoint_dir:   # every rank is gone: a save it left half-written
                    clear_staging(self.spec.checkpoint_dir, self.run_id)
                release_folder(self.spec.checkpoint_dir, self.run_id)
            with self._cond:
                self.summary, self.status = summary, status
                self._cond.notify_all()

    # ---- what went wrong: runtime/failures.py says it -------------------------------------------
    def _died(self, rank: int, exitcode: int) -> dict:
        return died(self.spec, rank, exitcode)

    def _fail(self, rank: int, body: dict, last_step: dict, finished: set) -> RunFailed:
        return rank_failed(self.spec, rank, body, last_step, finished, self._stack_of)

    def _fail_silent(self, rank: int, last_step: dict) -> RunFailed:
        return silent_failure(self.spec, rank, last_step, self._stack_of)

    def _stack_of(self, rank: int) -> tuple[str, str]:
        return stack_of(self.pids[rank], self._folder, rank)

    def _release_attempt(self) -> None:
        """End this attempt's ranks and let go of them: pipes closed, process handles released."""
        procs, controls, readers = self._procs, self._controls, self._readers
        self._procs, self._controls, self._readers = [], [], []   # no one sees a closed handle
        terminate_ranks(procs, controls)
        close_all(readers)
        release_ranks(procs)


