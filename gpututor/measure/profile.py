"""Profile a few training steps: which operators the time goes to, and when each one ran.

A profiler (``torch.profiler``) records an event for every operator PyTorch dispatches
(``aten::mm``, ``aten::copy_``, ...): its start, its end, its thread, and the operator or range
that called it. ``record_function("forward")`` adds a named range of our own, so each step's
``forward``, ``backward`` and ``optimizer`` phases sit around their operators, and each whole
step sits in a ``step#i`` range (what ``profiler.step()`` would mark ``ProfilerStep#i``).

Two views come out of those events:

- the **top operators** (:meth:`Profile.top_ops`): per ATen operator, its calls and its *self*
  time (time in it, less the time in the operators it called), largest first;
- the **timeline** (:meth:`Profile.timeline`): each outermost operator (one no other operator
  called: ``aten::linear``, not the ``aten::addmm`` inside it) from its start to its end. Gaps
  between them are time no operator ran: Python, the autograd engine's bookkeeping, waiting.
  :meth:`Profile.breakdown` adds the timeline up by category (:func:`category`).

The trace file (``trace_path``) keeps every event. Open it in Perfetto (https://ui.perfetto.dev,
"Open trace file") or in Chrome at chrome://tracing ("Load") and zoom into any step.
:func:`new_trace_path` gives each call a file of its own, in a private folder of the temp folder
(a fixed name there could be another user's file or a link to one, and two notebooks would
overwrite each other's trace).

Threads: on CPU the autograd engine runs backward on the thread that called ``loss.backward()``,
so a step's events all lie on one thread. On a GPU, backward runs on the engine's own thread for
that device, where no ``backward`` range is a parent; so an operator's phase and step are found
by *time* (the range holding its start), which works on any thread. On a GPU the timeline is the
host's (an op's bar is its launch; the kernel runs later), and ``top_ops`` reads device time.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import tempfile
from bisect import bisect_right
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

from ..checks import InvalidValue
from ..config import RunSpec

PHASES = ("forward", "backward", "optimizer")
STEP = "step#"                      # each profiled step's range is named step#0, step#1, ...
OP_KINDS = ("compute", "copy", "other")

# What an operator does, from its name (fnmatch patterns, ``aten::`` left off): the one place
# categories are decided. compute: the matmul-like ops, where the arithmetic is. copy: ops that
# move or gather data without arithmetic on it. An embedding lookup is a gather (index_select),
# its backward a scatter-add: copies. reshape and flatten take time only when the tensor's layout
# forces a copy (a view costs next to nothing): copies too. other: the rest (elementwise, softmax,
# layer norm, reductions, views, allocation). The timeline judges an outermost op by its own
# name: an ``aten::linear`` is compute, although the ``aten::addmm`` in it starts by copying the
# bias into the output, a ``copy_`` that the top-ops table (self time) does show as a copy.
CATEGORY_PATTERNS = {
    "compute": ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv",
                "dot", "einsum", "*attention*", "*convolution*", "conv[123]d",
                "conv_transpose[123]d"),
    "copy": ("copy_", "to", "_to_copy", "contiguous", "clone", "cat", "stack", "repeat",
             "reshape", "flatten", "embedding*", "index", "index_select", "gather",
             "index_put_", "index_add_", "scatter*"),
}


def category(op_name: str) -> str:
    """The category of an operator, by its name (``"aten::addmm"`` -> ``"compute"``)."""
    name = op_name.removeprefix("aten::")
    for kind, patterns in CATEGORY_PATTERNS.items():
        if any(fnmatchcase(name, p) for p in patterns):
            return kind
    return "other"


@dataclass
class Profile:
    """What the profiler saw over the profiled steps, as plain rows. Times are seconds from the
    first profiled step's start; ``wall_s`` runs from there to the last step's end."""

    losses: list[float]
    wall_s: float
    trace_path: str | None = None
    op_totals: list[dict] = field(default_factory=list)   # every ATen op, by self time
    op_events: list[dict] = field(default_factory=list)   # outermost ops, by start
    phase_rows: list[dict] = field(default_factory=list)

    def top_ops(self, n: int = 10) -> list[dict]:
        """The ``n`` operators with the most self time: ``name``, ``category``, ``calls``,
        ``self_s``, ``total_s`` and ``share`` (self time over the wall time)."""
        return self.op_totals[:n]

    def timeline(self) -> list[dict]:
        """The outermost operators, by start: ``name``, ``start_s``, ``end_s``, ``category``,
        ``phase`` (None between phases), ``step`` and ``thread``."""
        return list(self.op_events)

    def phases(self) -> list[dict]:
        """Each step's phases, by start: ``phase``, ``step``, ``start_s``, ``end_s``."""
        return list(self.phase_rows)

    def breakdown(self) -> dict:
        """Seconds of wall time that outermost operators of each category covered, and
        ``idle_s``, covered by none. Each instant counts once (if ops of two threads overlap, it
        goes to compute, then copy, then other), so the parts add up to ``wall_s``."""
        parts = dict.fromkeys(OP_KINDS, 0.0)
        running = dict.fromkeys(OP_KINDS, 0)
        marks = sorted([(r["start_s"], 1, r["category"]) for r in self.op_events]
                       + [(r["end_s"], -1, r["category"]) for r in self.op_events])
        last = 0.0
        for t, change, kind in marks:
            busy = next((c for c in OP_KINDS if running[c]), None)
            if busy is not None:
                parts[busy] += t - last
            running[kind] += change
            last = t
        covered = sum(parts.values())
        return {**{f"{c}_s": parts[c] for c in OP_KINDS},
                "idle_s": self.wall_s - covered, "wall_s": self.wall_s}


def train_step(model: torch.nn.Module, optimizer, x: torch.Tensor, y: torch.Tensor,
               device: torch.device) -> torch.Tensor:
    """One training step, each phase in its named range; the loss, detached (read after the
    profile, so no step waits for the device to print it)."""
    optimizer.zero_grad(set_to_none=True)
    x, y = x.to(device), y.to(device)
    with record_function("forward"):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer"):
        optimizer.step()
    return loss.detach()


def new_trace_path(prefix: str = "gpututor_trace_") -> Path:
    """Where to write a new trace: ``trace.json`` in a new folder of the temp folder that only
    this user can enter (``tempfile.mkdtemp``), so the name is unique and the file private
    (the profiler replaces the file it writes, so a file's own permissions would not last)."""
    return Path(tempfile.mkdtemp(prefix=prefix)) / "trace.json"


def profile_steps(model: torch.nn.Module, batches, optimizer=None, steps: int = 3,
                  warmup: int = 1, trace_path=None) -> Profile:
    """Train ``warmup`` steps unprofiled, then ``steps`` steps under the profiler (default
    optimizer: AdamW at ``RunSpec``'s learning rate); export the trace to ``trace_path`` if given."""
    if steps < 1:
        raise InvalidValue("steps", steps, "1 or more (at least 1 step is profiled)")
    if warmup < 0:
        raise InvalidValue("warmup", warmup, "0 or more (it counts steps)")
    # drawn before profiling, so making the data is not part of what is measured
    taken = list(itertools.islice(batches, warmup + steps))
    if len(taken) < warmup + steps:
        raise ValueError(f"batches gave {len(taken)} batches: warmup={warmup} + steps={steps} "
                         f"need {warmup + steps}")
    if optimizer is None:
        optimizer = torch.optim.AdamW(model.parameters(), lr=RunSpec.lr, weight_decay=0.0)
    device = next(model.parameters()).device
    on_cuda = any(p.is_cuda for p in model.parameters())
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])

    def synchronize():
        if on_cuda:
            torch.cuda.synchronize(device)

    for x, y in taken[:warmup]:            # first steps pay for allocation and lazy setup
        train_step(model, optimizer, x, y, device)
    losses = []
    with quiet_profiler(), profile(activities=activities) as prof:
        synchronize()                      # the warm-up's queued work ends before step 0
        for i, (x, y) in enumerate(taken[warmup:]):
            with record_function(f"{STEP}{i}"):
                losses.append(train_step(model, optimizer, x, y, device))
                if i == steps - 1:
                    synchronize()          # the last step ends when the device is done
    if trace_path is not None:
        trace_path = str(trace_path)
        prof.export_chrome_trace(trace_path)
    return read_profile(prof, [loss.item() for loss in losses], on_cuda, trace_path)


# what the profiler's own C++ logger (Kineto) writes to file descriptor 2 at every start and stop
# (torch 2.13: "USDT:... profiler_start"), whatever KINETO_LOG_LEVEL says: noise under a lesson
PROFILER_NOISE = ("USDT:", "STAGE:")


@contextlib.contextmanager
def quiet_profiler():
    """Run the block with the profiler's own start and stop lines (:data:`PROFILER_NOISE`) kept
    out of the output; anything else written to file descriptor 2 meanwhile is written after."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):   # no descriptor 2 to redirect: leave it
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [line for line in caught.read().decode(errors="replace").splitlines(True)
                    if not line.startswith(PROFILER_NOISE)]
            if kept:
                sys.stderr.write("".join(kept))


def _holding(rows: list[dict], starts: list[float], t: float) -> dict | None:
    """The row (sorted by start, not overlapping) whose span holds instant ``t``, or None."""
    i = bisect_right(starts, t) - 1
    return rows[i] if i >= 0 and t <= rows[i]["end_s"] else None


def _is_outermost(event) -> bool:
    """True when no ATen operator is above ``event`` in its thread's call tree."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return False
        parent = parent.cpu_parent
    return True


def read_profile(prof, losses: list[float], on_cuda: bool = False,
                 trace_path: str | None = None) -> Profile:
    """Read a finished ``torch.profiler.profile`` of ``step#i`` ranges into a :class:`Profile`."""
    events = prof.events()
    step_events = sorted((e for e in events if e.name.startswith(STEP)),
                         key=lambda e: e.time_range.start)
    origin = step_events[0].time_range.start          # microseconds, the profiler's clock

    def span(e) -> dict:
        return {"start_s": (e.time_range.start - origin) / 1e6,
                "end_s": (e.time_range.end - origin) / 1e6}

    step_rows = [{"step": int(e.name.removeprefix(STEP)), **span(e)} for e in step_events]
    wall_s = step_rows[-1]["end_s"]
    step_starts = [r["start_s"] for r in step_rows]
    phase_rows = []
    for e in sorted((e for e in events if e.name in PHASES), key=lambda e: e.time_range.start):
        row = span(e)
        step = _holding(step_rows, step_starts, row["start_s"])
        phase_rows.append({"phase": e.name, "step": step["step"], **row})
    phase_starts = [r["start_s"] for r in phase_rows]

    op_events = []
    for e in events:
        if not e.name.startswith("aten::") or not _is_outermost(e):
            continue
        row = span(e)
        step = _holding(step_rows, step_starts, row["start_s"])
        if step is None:                  # outside the profiled steps (the synchronize before)
            continue
        phase = _holding(phase_rows, phase_starts, row["start_s"])
        op_events.append({"name": e.name, **row, "category": category(e.name),
                          "phase": phase["phase"] if phase else None, "step": step["step"],
                          "thread": e.thread})
    op_events.sort(key=lambda r: r["start_s"])

    op_totals = []
    for a in prof.key_averages():
        if not a.key.startswith("aten::"):   # our ranges, the optimizer's, autograd's nodes
            continue
        self_us = a.self_device_time_total if on_cuda else a.self_cpu_time_total
        total_us = a.device_time_total if on_cuda else a.cpu_time_total
        op_totals.append({"name": a.key, "category": category(a.key), "calls": a.count,
                          "self_s": self_us / 1e6, "total_s": total_us / 1e6,
                          "share": self_us / 1e6 / wall_s})
    op_totals.sort(key=lambda r: -r["self_s"])
    return Profile(losses=losses, wall_s=wall_s, trace_path=trace_path, op_totals=op_totals,
                   op_events=op_events, phase_rows=phase_rows)
