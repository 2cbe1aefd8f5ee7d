"""Time inside a step: phase timers, the communication meter, and a timer for collectives.

A strategy gets a :class:`StepContext` for each rank; it times phases with ``ctx.phase(name)``
and counts every collective in ``ctx.comm`` (a :class:`CommMeter`). :class:`CollectiveTimer`
times collectives that a library (FSDP2, DTensor) runs for us.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from ..formulas import bus_factor


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so wall-clock timers measure it (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_call(call, device: torch.device, budget_s: float) -> float:
    """Mean seconds of ``call()`` over as many calls as fit in ``budget_s`` (at least one).

    The calls go in batches that double (1, 2, 4, ...), and the clock is read, after a device
    synchronisation, only between batches: a GPU queues a batch's kernels back to back, so the
    time is the kernels', not one synchronisation round trip per call (which makes every small
    kernel look latency-bound). On CPU a call's work is done when it returns: the same mean."""
    synchronize(device)
    reps, batch, start = 0, 1, time.perf_counter()
    while True:
        for _ in range(batch):
            call()
        reps += batch
        synchronize(device)
        elapsed = time.perf_counter() - start
        if elapsed >= budget_s:
            return elapsed / reps
        batch *= 2


class DeviceMark:
    """A point in the device's own timeline, without waiting for the device.

    On CPU the host clock: work there runs when it is called (gloo's collectives too, by the
    time their futures complete), so "now" is when it happened. On CUDA a timing event
    recorded on the current stream: it completes when the work queued before it on that stream
    has, so the time between two marks is device time even though the host ran far ahead
    (NCCL calls and autograd return as soon as the work is queued). Inside a CUDA future's
    ``then`` callback the current stream waits for the future's work (torch.futures docs), so a
    mark made there completes when that work does. Read :meth:`seconds_since` at the end of the
    step, when the work is done."""

    def __init__(self, device: torch.device):
        self.device, self.cuda = device, device.type == "cuda"
        if self.cuda:
            self.event = torch.cuda.Event(enable_timing=True)
            self.event.record()
        else:
            self.time = time.perf_counter()

    def seconds_since(self, earlier: "DeviceMark") -> float:
        if self.cuda:
            self.event.synchronize()
            return earlier.event.elapsed_time(self.event) / 1e3
        return self.time - earlier.time


@dataclass
class CommMeter:
    """What the strategy's collectives did this step: bytes sent in, busy time, exposed wait."""

    bytes: int = 0           # data size S of each collective (nccl-tests' convention)
    busy_s: float = 0.0      # sum of collective durations (may overlap compute)
    exposed_s: float = 0.0   # time compute stood still waiting for communication
    emulated_s: float = 0.0  # delay added by an emulated link (parallel/link.py), if any
    calls: int = 0
    wire_bytes: float = 0.0  # what each rank sends with ring algorithms: S x bus factor
    world_size: int = 1
    exposed_unknown: bool = False  # an async collective on CUDA ran: its wait is not measured
    unmetered: bool = False        # the strategy's collectives are torch's own: none measured
    timeline: object = None        # a measure.timeline.Timeline: every collective also a span

    def reset(self) -> None:
        self.bytes, self.busy_s, self.exposed_s, self.emulated_s, self.calls = 0, 0.0, 0.0, 0.0, 0
        self.wire_bytes, self.exposed_unknown = 0.0, False

    def add(self, nbytes: int, seconds: float, op: str = "all_reduce",
            group_size: int | None = None, start: "DeviceMark | None" = None,
            end: "DeviceMark | None" = None, span: bool = True) -> None:
        """Count one collective ``op`` ("all_reduce", "all_gather", ...) of data size ``nbytes``
        among ``group_size`` ranks (default: all of them). With a timeline, it is also a span:
        between ``start`` and ``end`` where the caller has those marks (an asynchronous
        collective), else the ``seconds`` that have just ended (a blocking one); ``span=False``:
        counted only (a send queued now, whose time is its exchange's span)."""
        if self.timeline is not None and span:
            group = group_size or self.world_size
            if start is not None and end is not None:
                self.timeline.add("collective", op, start, end, nbytes, group)
            else:
                self.timeline.add_ending_now("collective", op, seconds, nbytes, group)
        self.bytes += nbytes
        self.wire_bytes += nbytes * bus_factor(op, group_size or self.world_size)
        self.busy_s += seconds
        self.calls += 1


@dataclass
class StepContext:
    """What a strategy gets for one rank: who it is, where it runs, and meters to fill."""

    spec: object
    rank: int
    world_size: int
    device: torch.device
    comm: CommMeter = field(default_factory=CommMeter)
    phases: dict = field(default_factory=dict)
    probe: object = None    # a measure.memory.LiveBytesProbe on the step that measures memory
    after_backward: object = None  # set by a strategy that wants to know when backward ended
    link: object = None     # a parallel.link.EmulatedLink when the spec asks for one
    extra: dict = field(default_factory=dict)  # more keys for this step's record (e.g. a
                                               # pipeline's bubble_fraction and timeline)
    grid: object = None     # the rank grid (parallel.mesh.RankGrid); None = one dim
    groups: dict = field(default_factory=dict)   # dim -> this rank's parallel.mesh.DimGroup
    device_meshes: dict = field(default_factory=dict)  # made once: grid shape -> DeviceMesh
    timeline: object = None  # this step's measure.timeline.Timeline (RunSpec.timeline), or None

    def __post_init__(self):
        self.comm.world_size = self.world_size
        self._marks = []   # (phase, start mark, end mark) not read yet

    @contextmanager
    def phase(self, name: str):
        """Time a phase of the step (forward, backward, optimizer, ...), device work included.

        On CUDA the phase is two marks on the device's timeline, not a ``synchronize`` at each
        end: waiting there would stop the work of one phase from overlapping the next (a
        prefetched all-gather, a bucket still being reduced), the overlap a strategy exists to
        show. The marks are read by :meth:`read_phases` once the step has finished."""
        if self.probe is not None:
            self.probe.set_phase(name)
        start = DeviceMark(self.device)
        try:
            yield
        finally:
            end = DeviceMark(self.device)
            self._marks.append((name, start, end))
            if self.timeline is not None:
                self.timeline.add("compute", name, start, end)
            if not start.cuda:
                self.read_phases()

    def read_phases(self) -> dict:
        """Add the marked phases to ``phases`` (on CUDA: after the step's work has finished)."""
        for name, start, end in self._marks:
            self.phases[name] = self.phases.get(name, 0.0) + end.seconds_since(start)
        self._marks = []
        return self.phases

    def reset(self) -> None:
        self.comm.reset()
        self.phases = {}
        self._marks = []
        self.extra = {}


class CollectiveTimer:
    """Times collectives: wall clock on CPU (they block); on CUDA, marks on the device's
    timeline (:class:`DeviceMark`). A synchronous collective makes the current stream wait for
    it, so a mark right after it completes with it, and compute (on the default stream) waited
    all of that time. An async one (``work`` returned) ends where its future's callback marks it
    (the callback's stream waits for the work), and one issued on a side stream (FSDP2 runs its
    collectives on its own streams) overlaps compute: for those, how much compute waited is not
    known, and the step's ``comm_s`` (and ``compute_s``) is then None, not measured."""

    def __init__(self, meter: CommMeter, device: torch.device):
        self.meter, self.device, self.pending = meter, device, []

    def run(self, op: str, nbytes: int, collective, group_size: int | None = None):
        """Run ``collective()`` (among ``group_size`` ranks; default all) and meter it."""
        if self.device.type == "cuda":
            entry = {"op": op, "nbytes": nbytes, "group_size": group_size,
                     "start": DeviceMark(self.device), "end": None}
            # issued on a side stream (FSDP2's all-gather and reduce-scatter streams), even a
            # synchronous collective makes only that stream wait: compute overlaps it
            side = torch.cuda.current_stream(self.device) != torch.cuda.default_stream(self.device)
            work = collective()
            if work is None:
                entry["end"], entry["waited"] = DeviceMark(self.device), not side
            else:
                entry["waited"] = False
                work.get_future().then(lambda _: entry.update(end=DeviceMark(self.device)))
            self.pending.append(entry)
            return work
        start = time.perf_counter()
        work = collective()
        if work is not None:  # asked for an async op: wait here so it can be timed
            work.wait()
        seconds = time.perf_counter() - start
        self.meter.add(nbytes, seconds, op=op, group_size=group_size)
        self.meter.exposed_s += seconds
        return None

    def ended(self, op: str, nbytes: int, start: DeviceMark, group_size: int | None = None):
        """Meter a collective a library ran by itself, from ``start`` (a mark made before it)
        to now: on CPU it blocked, so all of it was waited for; on CUDA a mark on the current
        stream (the library's), read at :meth:`flush`, and how long compute waited not known."""
        end = DeviceMark(self.device)
        if self.device.type == "cuda":
            self.pending.append({"op": op, "nbytes": nbytes, "group_size": group_size,
                                 "start": start, "end": end, "waited": False})
            return
        seconds = end.seconds_since(start)
        self.meter.add(nbytes, seconds, op=op, group_size=group_size, start=start, end=end)
        self.meter.exposed_s += seconds

    def flush(self) -> None:
        """At the end of a step: read the CUDA marks (a no-op on CPU)."""
        for e in self.pending:
            end = e["end"] or DeviceMark(self.device)   # callback not run: an upper bound
            seconds = end.seconds_since(e["start"])
            self.meter.add(e["nbytes"], seconds, op=e["op"], group_size=e["group_size"],
                           start=e["start"], end=end)
            if e["waited"]:
                self.meter.exposed_s += seconds
            else:
                self.meter.exposed_unknown = True
        self.pending.clear()
