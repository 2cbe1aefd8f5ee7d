"""A timeline of one rank's step: when each compute phase and each collective ran, on one clock
that every rank of the machine shares.

With ``RunSpec(timeline=True)`` the worker gives each step's :class:`~.timing.StepContext` a
:class:`Timeline`; ``ctx.phase`` adds a compute span (forward, backward, sync, optimizer, ...)
and the communication meter adds a span per collective it counts (its kind, bytes and group
size). The step's record then carries ``timeline``: a list of spans, each
``{"kind": "compute" | "collective", "name", "start", "end", "bytes", "group"}`` with ``start``
and ``end`` in seconds since the epoch.

The clock: a :class:`~.timing.DeviceMark` at the start of the step anchors the device's timeline
to the host's wall clock (``time.time()``); every span is that wall time plus its marks' distance
from the anchor on the device. On CPU the marks are ``time.perf_counter()`` (Linux's
CLOCK_MONOTONIC, one clock for every process of a machine); on CUDA they are events on the
stream, read after the step, so a collective that overlaps compute shows where it ran on the
device, not when the host queued it. Ranks on different machines share a clock only as well as
their wall clocks agree (NTP: typically within milliseconds).

:func:`chrome_trace` turns a run's records into the Chrome trace format (JSON: one process per
rank, one thread for compute and one for collectives) that Perfetto and ``chrome://tracing``
open.
"""
from __future__ import annotations

import time

import torch

from .timing import DeviceMark

SPAN_KINDS = ("compute", "collective")
TAIL_SLACK_S = 1e-3   # a tail span ends within this of its phase's end (the marks are taken apart)


class Timeline:
    """The spans of one rank's step (see the module docstring)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.anchor = DeviceMark(device)
        self.wall = time.time()
        self.pending = []   # (kind, name, start mark or None, end mark, seconds, bytes, group)

    def add(self, kind: str, name: str, start: DeviceMark, end: DeviceMark, nbytes=None,
            group=None) -> None:
        """A span between two marks (read when the step has finished)."""
        self.pending.append((kind, name, start, end, None, nbytes, group))

    def add_ending_now(self, kind: str, name: str, seconds: float, nbytes=None,
                       group=None) -> None:
        """A span that took ``seconds`` and has just ended (a blocking collective, timed by
        its caller with the device synchronised around it)."""
        self.pending.append((kind, name, None, DeviceMark(self.device), seconds, nbytes, group))

    def spans(self) -> list[dict]:
        """Every span on the wall clock, in the order they started (call after the step)."""
        out = []
        for kind, name, start, end, seconds, nbytes, group in self.pending:
            stop = self.wall + end.seconds_since(self.anchor)
            begin = stop - seconds if start is None else self.wall + start.seconds_since(
                self.anchor)
            out.append({"kind": kind, "name": name, "start": begin, "end": stop,
                        "bytes": nbytes, "group": group})
        out.sort(key=lambda span: span["start"])
        compute = [span for span in out if span["kind"] == "compute"]
        for outer in compute:   # a phase's tail marked apart (DDP's wait at the end of
            for inner in compute:   # backward): the phase ends where its tail begins
                if inner is not outer and outer["start"] < inner["start"] <= outer["end"] \
                        and inner["end"] <= outer["end"] + TAIL_SLACK_S:
                    outer["end"] = inner["start"]
        return out


def chrome_trace(records: list[dict]) -> dict:
    """The Chrome trace (``{"traceEvents": [...]}``) of every step's ``timeline`` in
    ``records``: a process per rank, thread 1 its compute phases, thread 2 its collectives,
    times in microseconds from the first span of the run. Records without a timeline are left
    out; none at all gives an empty trace."""
    steps = [r for r in records if r.get("timeline")]
    if not steps:
        return {"traceEvents": [], "displayTimeUnit": "ms"}
    origin = min(span["start"] for r in steps for span in r["timeline"])
    events = []
    for rank in sorted({r["rank"] for r in steps}):
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                       "args": {"name": f"rank {rank}"}})
        for tid, kind in enumerate(SPAN_KINDS, start=1):
            events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid,
                           "args": {"name": kind}})
    for r in steps:
        for span in r["timeline"]:
            events.append({
                "ph": "X", "name": span["name"], "cat": span["kind"], "pid": r["rank"],
                "tid": SPAN_KINDS.index(span["kind"]) + 1,
                "ts": (span["start"] - origin) * 1e6,
                "dur": max(0.0, span["end"] - span["start"]) * 1e6,
                "args": {"step": r["step"], "bytes": span["bytes"], "group": span["group"]}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
