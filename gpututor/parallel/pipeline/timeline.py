"""A pipeline's measured timeline: when each stage ran each micro-batch's forward and backward.

:class:`StageTimeline` records, in one rank, the start and end of every forward ("F") and
backward ("B") of every micro-batch (zero-bubble schedules split the backward: "B" for the
input gradient, "W" for the weight gradient), on a clock that all stages share (ranks on one machine
read the same monotonic clock; across machines they leave a barrier together and count from
there). At the end of the step the stages exchange three numbers each and compute the
*measured* bubble fraction:

    bubble = 1 - (time all stages spent computing) / (stages x time from first start to last end)

to compare with :func:`theoretical_bubble_fraction`, the share of the step that p equal stages
with m micro-batches and free communication sit idle: (p - 1) / (m + p - 1); with v chunks per
rank (interleaved 1F1B) (p - 1) / (v·m + p - 1). (The planner's ``bubble_to_compute_ratio`` is
the same idle time measured against the ideal compute time instead of the whole step:
(p - 1) / m, and (p - 1) / (v·m) interleaved.) The charts of these records are in ``gpututor.ui``.
"""
from __future__ import annotations

import socket
import sys
import time
from contextlib import contextmanager

import torch
import torch.distributed as dist

from ...formulas import theoretical_bubble_fraction  # noqa: F401 (the theory to compare with)
from ...measure.timing import synchronize
from ..exchange import all_gather_bytes
from ..mesh import dim_group

PHASE_OF_ACTION = {"F": "forward", "B": "backward", "W": "backward"}


def measured_bubble_fraction(spans: list[tuple[float, float, float]]) -> float:
    """Measured share of the step the stages were idle, from each stage's
    ``(first start, last end, busy seconds)``."""
    start = min(s for s, _, _ in spans)
    end = max(e for _, e, _ in spans)
    busy = sum(b for _, _, b in spans)
    return 1.0 - busy / (len(spans) * (end - start)) if end > start else 0.0


class StageTimeline:
    """The events of one stage during one step; ``finish()`` exchanges them for the bubble."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.events: list[tuple] = []   # (kind, micro-batch, start, end, stage)
        self.t0 = 0.0

    def start(self) -> None:
        """Start a step's timeline. Ranks on one host read one clock; otherwise they leave a
        barrier together and count from there (off by up to one message's latency)."""
        synchronize(self.ctx.device)
        self.events = []
        if not one_clock(self.ctx):
            dist.barrier()
            self.t0 = time.perf_counter()

    @contextmanager
    def interval(self, kind: str, micro: int, stage: int = 0):
        """Time one forward ("F"), backward ("B") or weight-gradient pass ("W") of micro-batch
        ``micro`` on (virtual) stage ``stage``, device work included."""
        with self.ctx.phase(PHASE_OF_ACTION[kind]):
            # a message received before (its wait only queued on a GPU) lands before the start
            synchronize(self.ctx.device)
            start = time.perf_counter() - self.t0
            yield
            synchronize(self.ctx.device)
            end = time.perf_counter() - self.t0
        self.events.append((kind, micro, start, end, stage))

    def last_event(self, kind: str) -> tuple[int, int]:
        """``(micro-batch, stage)`` of the latest event of ``kind``."""
        return next(((m, st) for k, m, _, _, st in reversed(self.events) if k == kind), (0, 0))

    def finish(self) -> float:
        """Measured bubble fraction of the step (a collective: every stage must call it); puts
        it and this stage's events into the step's record."""
        busy = sum(end - start for _, _, start, end, _ in self.events)
        first = min((s for _, _, s, _, _ in self.events), default=0.0)
        last = max((e for _, _, _, e, _ in self.events), default=0.0)
        mine = torch.tensor([first, last, busy], dtype=torch.float64, device=self.ctx.device)
        pp = dim_group(self.ctx, "pp")    # the stages of this rank's pipeline
        spans = [torch.empty_like(mine) for _ in range(pp.size)]
        synchronize(self.ctx.device)
        start = time.perf_counter()
        dist.all_gather(spans, mine, group=pp.group)
        synchronize(self.ctx.device)
        if self.ctx.comm.timeline is not None:   # on the timeline only (24 bytes, not metered):
            # its length is this stage's wait for the last one to finish its passes (the drain)
            self.ctx.comm.timeline.add_ending_now("collective", BUBBLE_GATHER,
                                                  time.perf_counter() - start, mine.nbytes,
                                                  pp.size)
        spans = [tuple(s.tolist()) for s in spans]
        bubble = measured_bubble_fraction(spans)
        origin = min(first for first, _, _ in spans)   # the step's first compute, any stage
        self.ctx.extra["bubble_fraction"] = bubble
        self.ctx.extra["stage_events"] = [[k, m, s - origin, e - origin]
                                          for k, m, s, e, _ in self.events]
        # which (virtual) stage ran each event: with several model chunks per rank, a rank's
        # events belong to different stages
        self.ctx.extra["stage_event_stages"] = [st for *_, st in self.events]
        return bubble


BUBBLE_GATHER = "all_gather (bubble measure)"   # the timeline's name for finish()'s gather


def one_clock(ctx) -> bool:
    """True when every rank runs on this host (asked once per run): ``time.perf_counter`` is
    then the system's monotonic clock in all of them, and their times compare directly."""
    if getattr(ctx, "one_clock", None) is None:
        hosts = all_gather_bytes(socket.gethostname().encode())   # bytes, not pickles
        ctx.one_clock = len(set(hosts)) == 1 and sys.platform in ("linux", "darwin")
    return ctx.one_clock


def step_events(records: list[dict], step: int) -> dict[int, list]:
    """Stage (rank) -> its ``[kind, micro-batch, start, end]`` events at ``step``."""
    return {r["rank"]: r["stage_events"] for r in records
            if r["step"] == step and r.get("stage_events") is not None}


def step_stages(records: list[dict], step: int) -> dict[int, list]:
    """Rank -> the (virtual) stage of each of its events at ``step``, in :func:`step_events`'
    order: with an interleaved schedule, which model chunk ran it (virtual stage r + j·p)."""
    return {r["rank"]: r["stage_event_stages"] for r in records
            if r["step"] == step and r.get("stage_event_stages") is not None}


def handoff_s(events: dict[int, list], stages: dict[int, list] | None = None) -> float | None:
    """Shortest time, over micro-batches, from a stage ending a forward to the next stage
    starting it: what handing one micro-batch over costs when the next stage is waiting.
    ``stages`` (:func:`step_stages`) names each event's virtual stage; without it, the rank is
    the stage (one stage per rank)."""
    forwards = [(stages[rank][n] if stages else rank, m, s, e) for rank, evs in events.items()
                for n, (k, m, s, e) in enumerate(evs) if k == "F"]
    ends = {(stage, m): e for stage, m, _, e in forwards}
    gaps = [s - ends[(stage - 1, m)] for stage, m, s, _ in forwards if (stage - 1, m) in ends]
    return min(gaps) if gaps else None


def free_handoff_bubble(events: dict[int, list], stages: dict[int, list] | None = None
                        ) -> float | None:
    """The bubble the same step would have had if every hand-off were free: each rank runs its
    events in the measured order with their measured durations, and an event starts as soon as
    its rank is free and what it needs is done (a forward: the previous stage's forward of that
    micro-batch; a backward: the next stage's backward of it, and its own forward; a weight
    pass: its own backward). Measured minus this is what handing over (messages, and waiting
    for them) cost; this minus the theory is what unequal and uneven compute cost.
    ``stages`` as in :func:`handoff_s`."""
    todo = {rank: [(k, stages[rank][n] if stages else rank, m, e - s)
                   for n, (k, m, s, e) in enumerate(evs)] for rank, evs in events.items()}
    known = {(k, st, m) for evs in todo.values() for k, st, m, _ in evs}
    needs = {"F": lambda st, m: [("F", st - 1, m)],
             "B": lambda st, m: [("B", st + 1, m), ("F", st, m)],
             "W": lambda st, m: [("B", st, m)]}
    done, free, spans = {}, {rank: 0.0 for rank in todo}, {rank: [] for rank in todo}
    while any(todo.values()):
        progressed = False
        for rank, evs in todo.items():
            while evs:
                kind, st, m, seconds = evs[0]
                deps = [d for d in needs[kind](st, m) if d in known]
                if any(d not in done for d in deps):
                    break
                start = max([free[rank]] + [done[d] for d in deps])
                free[rank] = done[(kind, st, m)] = start + seconds
                spans[rank].append((start, start + seconds))
                evs.pop(0)
                progressed = True
        if not progressed:     # an order no schedule runs (a dependency that never comes)
            return None
    return measured_bubble_fraction([(min(s for s, _ in sp), max(e for _, e in sp),
                                      sum(e - s for s, e in sp)) for sp in spans.values() if sp])
