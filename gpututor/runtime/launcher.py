"""``launch(spec)``: start one process per rank and hand back a :class:`Run` at once.

How it stays safe in a notebook (the traps are listed in docs/architecture.md):
- ranks start from a *forkserver* (never a plain fork of the kernel) that imports torch and the
  worker once, so every launch after the first starts in a fraction of a second;
- the rendezvous is a file in a fresh temp folder (no port to race for); gloo talks over
  loopback only; every collective has the spec's short timeout;
- a collector thread drains records while watching every rank: the first failure stops the
  others and is raised in the notebook with the failing rank's traceback;
- each rank holds the read end of a pipe from the kernel and exits when it closes, so no rank
  outlives ``stop()`` or its kernel. No signal handler of the kernel is touched.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback as tb
from multiprocessing import connection

import cloudpickle
import psutil

from . import warm as _warm
from ..parallel import check_spec
from .guard import check_machine, check_main_guard, warn_if_oversubscribed
from .rank_output import STACK_SIGNAL, main_thread_stack
from .summary import summarize

STARTUP_GRACE_S = 60.0   # a rank may take this long (beyond the spec's timeout) to first report


class RunFailed(RuntimeError):
    """A rank failed; the message names the rank and carries its traceback."""

    def __init__(self, message: str, rank: int | None = None, traceback: str = ""):
        super().__init__(message + (f"\n\n--- traceback of rank {rank} ---\n{traceback}"
                                    if traceback else ""))
        self.rank, self.rank_traceback = rank, traceback


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


def launch(spec, start_method: str = "forkserver", task=None) -> "Run":
    """Start ``spec.world_size`` ranks training ``spec``; return a :class:`Run` immediately.

    ``task`` replaces the training loop with your own callable
    ``task(spec, rank, world_size, device, emit)`` (a benchmark, an exercise checker): a
    function, or an object (e.g. a small dataclass holding the task's own parameters). It is
    sent to the ranks with cloudpickle, so a function defined in a notebook cell works (it goes
    *by value*). Each ``emit(record)`` must carry ``"step"``. The run's summary is
    ``task.summarize(spec, records, status)`` if the task has that method, else the list of
    records. A task run uses only the spec's world size, device, threads, timeout and seed.
    """
    spec.validate()
    if spec.ranks_per_node not in (None, spec.world_size):
        raise ValueError(f"ranks_per_node={spec.ranks_per_node} is invalid with launch(): it "
                         f"starts all world_size={spec.world_size} ranks on this machine (two of "
                         f"them would share a GPU); allowed: None or {spec.world_size} "
                         "(ranks_per_node describes a torchrun node)")
    if task is None:
        check_spec(spec)   # the strategy's own checks: before any process starts
        if spec.resume:    # the checkpoint folder is complete and fits this model
            from .checkpoint import check_resume
            check_resume(spec)
    check_machine(spec)    # what this machine can do: a GPU per rank, fp16
    if start_method not in ("forkserver", "spawn"):
        raise ValueError(f"start_method={start_method!r} is invalid: allowed values are "
                         "'forkserver', 'spawn' (plain fork is unsafe in a kernel)")
    check_main_guard()          # a script without `if __name__ == "__main__":` would recurse
    warn_if_oversubscribed(spec)
    return Run(spec, start_method, task)


class Run:
    """A running (or finished) training run. Iterate it for records as they arrive.

    ``status`` is one of "starting", "running", "finished", "failed", "stopped". What the ranks
    print is kept in ``output`` as ``(rank, stream, line)`` and, while you iterate or wait,
    echoed to ``echo`` (default: this process's stdout, so the notebook cell shows it) as
    ``[rank R] line``; set ``echo = None`` to keep it quiet (the panel shows it in its log).
    """

    def __init__(self, spec, start_method: str = "forkserver", task=None):
        self.spec = spec
        self._summarize = summarize if task is None else \
            getattr(task, "summarize", lambda spec, records, status: list(records))
        self.records: list[dict] = []
        self.status = "starting"
        self.error: RunFailed | None = None
        self.summary: dict | None = None
        self.launched_at = time.perf_counter()
        self.first_record_at: float | None = None
        self.output: list[tuple[int, str, str]] = []
        self.echo = sys.stdout
        self._echoed = 0
        self._cond = threading.Condition()
        self._end_lock = threading.Lock()
        self._tmp = tempfile.mkdtemp(prefix="gpututor-")
        ctx = _context(start_method)
        self._queue = ctx.SimpleQueue()
        payload = cloudpickle.dumps((spec, task))
        self._procs, self._controls = [], []
        try:
            for rank in range(spec.world_size):
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_rank_entry, name=f"gpututor-rank{rank}",
                    args=(payload, rank, spec.world_size, f"{self._tmp}/store", self._queue,
                          reader, time.time()), daemon=True)
                try:
                    proc.start()
                except EOFError as exc:  # the forkserver died before it could fork the rank
                    raise RuntimeError(
                        "the ranks' forkserver died while starting: it imports "
                        + ", ".join(_warm.PRELOAD) + " first. Run `python -c 'import "
                        "gpututor.runtime.worker'` in this environment to see the error"
                    ) from exc
                reader.close()
                self._procs.append(proc)
                self._controls.append(writer)
        except BaseException:
            self._terminate()
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        self._collector = threading.Thread(target=self._collect, name="gpututor-collector",
                                           daemon=True)
        self._collector.start()

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
        # the collector closes the queue last: when wait() returns, nothing of the run is open
        if threading.current_thread() is not self._collector:
            self._collector.join(timeout=5)
        self._echo_new()
        if self.error is not None:
            raise self.error
        return self.summary

    def _echo_new(self) -> None:
        """Print the ranks' lines that arrived since the last call (to ``echo``)."""
        new = self.output[self._echoed:]
        self._echoed += len(new)
        if self.echo is not None and new:
            self.echo.write("".join(f"[rank {rank}] {line}\n" for rank, _, line in new))
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
        spec, world = self.spec, self.spec.world_size
        finished, last_seen = set(), {r: time.monotonic() for r in range(world)}
        last_step = {r: -1 for r in range(world)}
        cpu_seen = {r: self._cpu_seconds(r) for r in range(world)}
        reader = self._queue._reader
        try:
            while not self.done:
                connection.wait([reader] + [p.sentinel for p in self._procs], timeout=0.2)
                while not self.done and reader.poll():
                    kind, rank, body = self._queue.get()
                    if kind == "output":   # a line a rank printed: not a sign of progress
                        with self._cond:
                            self.output.append((rank, body["stream"], body["text"]))
                            self._cond.notify_all()
                        continue
                    last_seen[rank] = time.monotonic()
                    if kind == "record":
                        last_step[rank] = body["step"]
                        self._add(body)
                    elif kind == "done":
                        finished.add(rank)
                    else:
                        self._fail(rank, body, last_step, finished)
                if self.done:
                    break
                if len(finished) == world:
                    self._end("finished")
                    break
                for rank, proc in enumerate(self._procs):
                    if proc.exitcode not in (None, 0) and rank not in finished and not reader.poll():
                        self._fail(rank, self._died(rank, proc.exitcode), last_step, finished)
                        break
                now = time.monotonic()
                for rank in range(world):
                    allowed = spec.timeout + (STARTUP_GRACE_S if last_step[rank] < 0 else 5.0)
                    if rank not in finished and now - last_seen[rank] > allowed and not self.done:
                        # A long step (a big model's first, autotuning) keeps using CPU time; a
                        # rank that hangs does not. Only the second is reported.
                        cpu = self._cpu_seconds(rank)
                        if cpu is not None and cpu_seen[rank] is not None and \
                                cpu - cpu_seen[rank] > 0.05 * allowed:
                            last_seen[rank], cpu_seen[rank] = now, cpu
                            continue
                        self._fail_silent(rank, last_step)
                        break
        finally:
            self._end("failed" if self.error else "stopped")
            # Only this thread reads the queue, so only it closes it: closing it in _end() from
            # stop()'s thread raced with a get() here ("OSError: handle is closed").
            self._queue.close()

    def _add(self, record: dict) -> None:
        with self._cond:
            if self.first_record_at is None:
                self.first_record_at = time.perf_counter()
            if self.status == "starting":
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
                self._terminate()
                try:
                    summary = self._summarize(self.spec, self.records, status)
                except Exception as exc:  # noqa: BLE001 - the run must end, and say why
                    summary, status = None, "failed"
                    self.error = self.error or RunFailed(
                        f"the ranks ended ({len(self.records)} records), but summarizing the "
                        f"run failed: {type(exc).__name__}: {exc}", None, tb.format_exc())
            finally:
                shutil.rmtree(self._tmp, ignore_errors=True)
            with self._cond:
                self.summary, self.status = summary, status
                self._cond.notify_all()

    def _died(self, rank: int, exitcode: int) -> dict:
        """What to say of a rank that died without telling the collector why. On CUDA, a rank
        killed by SIGABRT is what NCCL's watchdog does to a rank whose collective timed out
        (torch.distributed docs, ``TORCH_NCCL_ASYNC_ERROR_HANDLING``): it waited for a peer, so
        it is reported as a timeout and the peer that stopped answering is named."""
        message = f"rank {rank} exited with code {exitcode}"
        if exitcode == -signal.SIGABRT and self.spec.resolved_device() == "cuda":
            message += (" (SIGABRT: NCCL's watchdog aborts a rank whose collective timed out "
                        "waiting for a peer)")
        return {"type": "ProcessDied", "message": message, "traceback": ""}

    def _fail(self, rank: int, body: dict, last_step: dict, finished: set) -> None:
        if self.done:
            return
        step = last_step[rank] + 1
        own = f"rank {rank} failed at step {step}: {body['type']}: {body['message']}"
        text = (body["message"] + body["traceback"]).lower()
        others = [r for r in range(self.spec.world_size) if r != rank and r not in finished]
        behind = [r for r in others if last_step[r] < last_step[rank]] or others
        if ("timeout" in text or "timed out" in text) and behind:
            # The root cause is the rank that stopped answering, not the one that gave up on it.
            silent = behind[0]
            where, stack = self._stack_of(silent)
            message = (f"rank {silent} stopped answering at step {last_step[silent] + 1}{where}; "
                       f"rank {rank} gave up waiting for it after timeout={self.spec.timeout} s"
                       f"\nrank {rank}: {body['type']}: {body['message'].splitlines()[0] if body['message'] else ''}"
                       + "".join(f"\nrank {r}: no record after step {last_step[r]}"
                                 for r in behind[1:]) + stack)
            self._end("failed", RunFailed(message, rank, body["traceback"]))
            return
        self._end("failed", RunFailed(own, rank, body["traceback"]))

    def _fail_silent(self, rank: int, last_step: dict) -> None:
        where, stack = self._stack_of(rank)
        message = (f"rank {rank} stopped answering at step {last_step[rank] + 1}{where}: no "
                   f"record and no CPU time used for more than timeout={self.spec.timeout} s "
                   f"(last record: step {last_step[rank]})" + stack)
        self._end("failed", RunFailed(message, rank))

    def _stack_of(self, rank: int) -> tuple[str, str]:
        """``(" (in FILE line N, FUNC)", the stack as text)`` of a live rank's main thread,
        which it writes on request (rank_output.dump_stack_on_request); empty if it cannot."""
        proc, path = self._procs[rank], os.path.join(self._tmp, f"stack-rank{rank}.txt")
        try:
            os.kill(proc.pid, STACK_SIGNAL)
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

    def _cpu_seconds(self, rank: int) -> float | None:
        try:
            times = psutil.Process(self._procs[rank].pid).cpu_times()
            return times.user + times.system
        except (psutil.Error, TypeError, ValueError):
            return None

    # ---- teardown ----------------------------------------------------------------------------
    def _terminate(self) -> None:
        for writer in self._controls:  # closing the pipe makes each rank exit by itself
            try:
                writer.close()
            except OSError:
                pass
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + 3
        for proc in self._procs:
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
