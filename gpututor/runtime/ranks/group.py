"""``gpututor.ranks(4)``: a group of live ranks held by the kernel, for typing code into.

Each rank is a process forked from the warm forkserver (runtime/warm.py, as ``launch()``'s ranks
are), joined to one process group (gloo on CPU, NCCL with a GPU per rank: the device policy of
``launch()``, ``guard.check_machine``), and keeps its own namespace from cell to cell
(``rank.py``). The kernel talks to each rank over a pipe (no port), each request with an id its
replies echo (``replies.py``); the ranks' rendezvous is a file in a fresh temp folder and gloo
talks over loopback only.

What can go wrong in a cell, and what the group does:

- a rank raises: its traceback is shown under its column; every rank keeps its names;
- the cell does not end within its timeout (a collective only some ranks call): the waiting
  ranks' stacks are read (SIGUSR1, faulthandler), the group is restarted, and the message names
  the waiting ranks, where they wait and which names were lost;
- the kernel is interrupted: every rank running the cell gets SIGINT; a rank stuck where Python
  cannot be interrupted (inside a collective) is restarted with the group;
- a rank dies: the group is restarted, saying so;
- ``gather`` reads every rank's reply before it raises, naming each rank that failed; a death,
  a timeout or an interrupt during it restarts the group, as in a cell.

``stop()``, the group being garbage-collected and the kernel's exit (``weakref.finalize`` runs at
exit) end every rank and remove the temp folder; a rank also exits by itself when the kernel's end
of its ``alive`` pipe closes, so a killed kernel leaves no rank behind. Starting and ending the
processes: ``processes.py``; reading where a rank waits: ``stacks.py``.
"""
from __future__ import annotations

import itertools
import os
import pickle
import signal
import time
import weakref

from ...checks import InvalidValue
from ...i18n import tr
from .. import warm
from .checks import check_group, check_timeout
from .lifecycle import joined_pid, start_rank, teardown
from .replies import is_death, replies
from .stacks import waiting_stack
from .view import CellResult, RankOutcome

INTERRUPT_GRACE_S = 2.0   # how long ranks have to stop after SIGINT before the group restarts


class CellInterrupted(KeyboardInterrupt):
    """The kernel was interrupted during a cell; ``result`` holds what each rank did."""

    def __init__(self, result: CellResult):
        super().__init__(result.message)
        self.result = result


class RankGroup:
    """``world_size`` live ranks. ``run(code)`` runs a cell on every rank (or ``ranks=[0, 2]``);
    ``gather(name)`` brings one name's value from every rank; ``stop()`` ends them all.

    ``timeout`` is how long a cell may run before the group gives up on it (seconds; each
    ``run`` may pass its own). ``device`` is ``launch()``'s: "auto", "cpu" or "cuda". How many
    ranks a group may have here: ``checks.py`` (4 per usable core on CPU, a GPU each on CUDA)."""

    def __init__(self, world_size: int = 4, device: str = "auto", timeout: float = 30.0,
                 threads_per_rank: int = 1, start_method: str = "forkserver"):
        self.spec, self.device, self.timeout = check_group(world_size, device, timeout,
                                                           threads_per_rank, start_method)
        self.world_size, self.start_method = world_size, start_method
        self.cells = 0
        self._requests = itertools.count(1)   # each request's id; its replies echo it
        self.names: dict[int, list[str]] = {}
        self.started_s: float | None = None
        self._procs: list = []
        self._finalizer = None
        self._start()
        from ..live import register; register(self)  # noqa: E702 - the kernel's shutdown stops it

    # ---- life ------------------------------------------------------------------------------
    def _start(self) -> None:
        started = time.perf_counter()
        ctx = warm.context(self.start_method)
        from ..scratch_dirs import new_scratch_dir   # sweeps the folders of killed kernels first
        self._tmp = new_scratch_dir("gpututor-ranks-")
        self._procs, self._conns, self._alive, self.pids = [], [], [], []
        self._finalizer = weakref.finalize(self, teardown, self._procs, self._conns,
                                           self._alive, self._tmp)
        try:   # each rank goes into the lists as soon as it starts: teardown ends it on any error
            for rank in range(self.world_size):
                proc, conn, alive = start_rank(ctx, rank, self.world_size, self.spec, self._tmp)
                self._procs.append(proc), self._conns.append(conn), self._alive.append(alive)
            for rank in range(self.world_size):
                self.pids.append(joined_pid(rank, self._conns[rank], self._procs[rank]))
        except BaseException:
            self._finalizer()
            raise
        self.names = {rank: [] for rank in range(self.world_size)}
        self.started_s = time.perf_counter() - started

    @property
    def running(self) -> bool:
        return bool(self._procs) and all(p.is_alive() for p in self._procs)

    def stop(self) -> None:
        """End every rank and remove the group's temp folder; nothing is left when it returns."""
        if self._finalizer is not None:
            self._finalizer()
        self.names = {}

    def restart(self) -> None:
        """A fresh group of the same size: every rank's names are gone."""
        self.stop()
        self._start()

    def __enter__(self) -> "RankGroup":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- cells -----------------------------------------------------------------------------
    def check_ranks(self, ranks) -> list[int]:
        """``ranks`` as a sorted list: None (every rank), an int, or a list of ints."""
        allowed = (f"ranks 0 to {self.world_size - 1} of this group of "
                   f"{self.world_size}, as one rank, a list such as [0, 2], or None for all")
        if ranks is None:
            return list(range(self.world_size))
        chosen = [ranks] if isinstance(ranks, int) and not isinstance(ranks, bool) else ranks
        if not isinstance(chosen, (list, tuple, range)) or not chosen or any(
                not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < self.world_size
                for r in chosen):
            raise InvalidValue("ranks", ranks, allowed)
        return sorted(set(chosen))

    def run(self, code: str, ranks=None, timeout: float | None = None,
            no_collectives: bool = False) -> CellResult:
        """Run ``code`` on ``ranks`` (default: all) and return each rank's outcome, side by side.
        With ``no_collectives`` every built-in collective refuses while the cell runs
        (``runtime/refuse.OnlyPointToPoint``); ``dist.send``/``recv`` still work."""
        if not isinstance(code, str):
            raise InvalidValue("code", type(code).__name__, "a str of Python")
        chosen = self.check_ranks(ranks)
        timeout = self.timeout if timeout is None else check_timeout(timeout)
        if not self.running:
            raise RuntimeError(tr("The ranks are not running: start them with %ranks start N "
                                  "or gpututor.ranks(N)."))
        self.cells += 1
        cell, started, request = self.cells, time.monotonic(), next(self._requests)
        for rank in chosen:
            self._conns[rank].send_bytes(pickle.dumps(("run", request, cell, code,
                                                       bool(no_collectives))))
        outcomes = {r: RankOutcome(r, state="waiting", seconds=None) for r in chosen}
        result = CellResult(cell, [outcomes[r] for r in chosen])
        try:
            waiting = self._collect(outcomes, request, started + timeout, result)
            if waiting:
                self._timed_out(waiting, result, code, timeout)
        except KeyboardInterrupt:
            self._interrupt(outcomes, request, result)
            result.seconds = time.monotonic() - started
            raise CellInterrupted(result) from None
        result.seconds = time.monotonic() - started
        return result

    def _collect(self, outcomes: dict, request: int, deadline: float,
                 result: CellResult) -> list[int]:
        """Take the ranks' replies to ``request`` until all came or ``deadline``
        (``time.monotonic``) passed; return the ranks still waiting. A rank that dies restarts
        the group."""
        pending = {r for r, o in outcomes.items() if o.state == "waiting"}
        for rank, reply in replies(self._conns, self._procs, pending, request, deadline):
            if is_death(reply):
                outcomes[rank].state = "died"
                self._restart_after(result, tr("rank {rank} died during the cell ({why}).",
                                               rank=rank, why=reply[2]))
                return []
            self._take(outcomes[rank], reply[2])
        return sorted(pending)

    def _take(self, outcome: RankOutcome, reply: dict) -> None:
        outcome.text, outcome.value, outcome.error = reply["text"], reply["value"], reply["error"]
        outcome.unanswered = reply.get("unanswered") or []
        outcome.seconds = reply["seconds"]
        outcome.state = "done" if reply["error"] is None else "error"
        if reply["error"] is not None and reply["error"]["type"] == "KeyboardInterrupt":
            outcome.state = "interrupted"
        self.names[outcome.rank] = reply["names"]

    def _timed_out(self, waiting: list[int], result: CellResult, code: str,
                   timeout: float) -> None:
        finished = [o.rank for o in result.outcomes if o.state != "waiting"]
        stacks = "".join(waiting_stack(self._tmp, rank, self._procs[rank].pid, code, self.cells)
                         for rank in waiting)
        message = tr("The cell did not end within timeout={timeout:g} s: ranks {waiting} were "
                     "still waiting (a collective that not every rank called waits forever); "
                     "ranks that finished: {finished}.", timeout=timeout,
                     waiting=_listed(waiting), finished=_listed(finished) or "-") + stacks
        self._restart_after(result, message)

    def _interrupt(self, outcomes: dict, request: int, result: CellResult) -> None:
        pending = [r for r, o in outcomes.items() if o.state == "waiting"]
        for rank in pending:
            try:
                os.kill(self._procs[rank].pid, signal.SIGINT)
            except OSError:
                pass
        result.interrupted = True
        try:
            stuck = self._collect(outcomes, request, time.monotonic() + INTERRUPT_GRACE_S,
                                  result)
        except KeyboardInterrupt:   # a second interrupt: stop waiting for them
            stuck = [r for r, o in outcomes.items() if o.state == "waiting"]
        if stuck and not result.restarted:
            self._restart_after(result, tr("Interrupted: ranks {stuck} did not stop within "
                                           "{grace:g} s (a rank waiting inside a collective "
                                           "cannot be interrupted).", stuck=_listed(stuck),
                                           grace=INTERRUPT_GRACE_S))
        elif not result.message:
            result.message = tr("Interrupted: every rank stopped the cell and kept its names.")

    def _restart_after(self, result: CellResult, why: str) -> None:
        result.message = self._restart_saying(why)
        result.restarted = True

    def _restart_saying(self, why: str) -> str:
        """Restart the group; return ``why`` followed by the restart and the names it lost."""
        lost = {r: names for r, names in self.names.items() if names}
        self.restart()
        gone = "; ".join(f"{tr('rank {rank}', rank=r)}: {', '.join(n)}" for r, n in lost.items())
        return why + "\n\n" + (
            tr("The group was restarted ({n} fresh ranks, in {seconds:.1f} s). Lost: {gone}.",
               n=self.world_size, seconds=self.started_s, gone=gone) if lost else
            tr("The group was restarted ({n} fresh ranks, in {seconds:.1f} s); no names were "
               "lost.", n=self.world_size, seconds=self.started_s))

    # ---- values ----------------------------------------------------------------------------
    def gather(self, name: str, ranks=None, timeout: float | None = None) -> list:
        """``name``'s value on each rank (rank order), brought to the kernel (tensors on CPU).

        Every chosen rank's reply is read before anything is raised, so no reply is left for a
        later request. A value a rank cannot send (a lock, a socket) raises ``RuntimeError``
        naming every rank that failed and why; the ranks keep their names. A rank that dies, no
        answer within ``timeout`` (default: the group's) or an interrupt restarts the group, as
        ``run()`` does, and the message says which names were lost."""
        if not isinstance(name, str) or not name.isidentifier():
            raise InvalidValue("name", name, "a Python name defined in the ranks' cells")
        chosen = self.check_ranks(ranks)
        timeout = self.timeout if timeout is None else check_timeout(timeout)
        if not self.running:
            raise RuntimeError(tr("The ranks are not running: start them with %ranks start N "
                                  "or gpututor.ranks(N)."))
        request, pending, got = next(self._requests), set(chosen), {}
        for rank in chosen:
            self._conns[rank].send_bytes(pickle.dumps(("get", request, name)))
        try:
            for rank, reply in replies(self._conns, self._procs, pending,
                                       request, time.monotonic() + timeout):
                got[rank] = reply
        except KeyboardInterrupt:
            raise KeyboardInterrupt(self._restart_saying(tr(
                "Interrupted while the ranks were sending {name}.", name=repr(name)))) from None
        return self._values(name, chosen, got, sorted(pending), timeout)

    def _values(self, name: str, chosen: list, got: dict, silent: list, timeout: float) -> list:
        """The gathered values in rank order, or the error that names every rank that failed."""
        import cloudpickle
        values, failed, missing = [], {}, []
        for rank, (kind, _, body, *_) in sorted(got.items()):
            if kind == "missing":
                missing.append(rank)
            elif kind == "unpicklable":
                failed[rank] = tr("its value cannot be sent ({error})", error=body)
            elif is_death(got[rank]):
                failed[rank] = tr("it died ({why})", why=body)
            else:
                try:
                    values.append(cloudpickle.loads(body))
                except Exception as exc:  # noqa: BLE001 - name the rank and the error
                    failed[rank] = tr("its value cannot be read in the kernel ({error})",
                                      error=f"{type(exc).__name__}: {exc}")
        failed.update({r: tr("no answer within {timeout:g} s", timeout=timeout) for r in silent})
        if failed:
            failed.update({r: tr("not defined") for r in missing})
            message = tr("Could not gather {name}: {failures}.", name=repr(name),
                         failures="; ".join(f"{tr('rank {rank}', rank=r)}: {why}"
                                            for r, why in sorted(failed.items())))
            if silent or any(is_death(reply) for reply in got.values()):
                message = self._restart_saying(message)
            raise RuntimeError(message)
        if missing:
            raise KeyError(f"name={name!r} is not defined on ranks {_listed(missing)}; "
                           f"allowed: a name every rank has ({self._names_everywhere()})")
        return values

    def _names_everywhere(self) -> str:
        sets = [set(n) for n in self.names.values()]
        common = sorted(set.intersection(*sets)) if sets else []
        return ", ".join(common) or "none yet"

    def status(self) -> str:
        """One line per rank: its pid, whether it lives, its names."""
        lines = [tr("{n} ranks on {device} ({backend}), cells run: {cells}, started in "
                    "{seconds:.2f} s", n=self.world_size, device=self.device,
                    backend="nccl + gloo" if self.device == "cuda" else "gloo", cells=self.cells,
                    seconds=self.started_s or 0.0)]
        for rank, proc in enumerate(self._procs):
            state = tr("alive") if proc.is_alive() else tr("gone")
            names = ", ".join(self.names.get(rank, [])) or "-"
            lines.append(tr("rank {rank}: pid {pid}, {state}, names: {names}", rank=rank,
                            pid=proc.pid, state=state, names=names))
        return "\n".join(lines) if self._procs else tr("The ranks are not running.")

    def __repr__(self) -> str:
        return (f"<RankGroup {self.world_size} ranks on {self.device}, "
                f"{'running' if self.running else 'stopped'}>")


def _listed(ranks) -> str:
    return ", ".join(str(r) for r in ranks)


def ranks(world_size: int = 4, device: str = "auto", timeout: float = 30.0,
          threads_per_rank: int = 1) -> RankGroup:
    """Start ``world_size`` live ranks (about a second once the forkserver is warm)."""
    return RankGroup(world_size, device=device, timeout=timeout,
                     threads_per_rank=threads_per_rank)
