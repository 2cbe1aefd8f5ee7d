"""A pipeline's measured timeline: when each stage ran each micro-batch's forward and backward.

:class:`StageTimeline` records, in one rank, the start and end of every forward ("F") and
backward ("B") of every micro-batch, on a clock that all stages share (ranks on one machine
read the same monotonic clock; across machines they leave a barrier together and count from
there). At the end of the step the stages exchange three numbers each and compute the
*measured* bubble fraction:

    bubble = 1 - (time all stages spent computing) / (stages x time from first start to last end)

to compare with the theory for p equal stages and m micro-batches, (p - 1) / (m + p - 1).
:func:`gantt` draws the events as a Gantt chart; :func:`live_gantt` redraws it while a run goes;
:func:`bubble_figure` and :func:`activations_figure` compare runs.
"""
from __future__ import annotations

import socket
import sys
import time
from contextlib import contextmanager

import plotly.graph_objects as go
import torch
import torch.distributed as dist

from .metrics import synchronize

PHASES = {"F": "forward", "B": "backward"}
COLORS = {"F": "#4c78a8", "B": "#f58518"}


def theoretical_bubble(stages: int, microbatches: int) -> float:
    """Idle fraction of GPipe and 1F1B with equal stages and free communication: (p-1)/(m+p-1)."""
    return (stages - 1) / (microbatches + stages - 1)


def bubble_fraction(spans: list[tuple[float, float, float]]) -> float:
    """Measured bubble from each stage's ``(first start, last end, busy seconds)``."""
    start = min(s for s, _, _ in spans)
    end = max(e for _, e, _ in spans)
    busy = sum(b for _, _, b in spans)
    return 1.0 - busy / (len(spans) * (end - start)) if end > start else 0.0


class StageTimeline:
    """The events of one stage during one step; ``finish()`` exchanges them for the bubble."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.events: list[tuple[str, int, float, float]] = []  # (kind, micro-batch, start, end)
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
    def interval(self, kind: str, micro: int):
        """Time one forward ("F") or backward ("B") of micro-batch ``micro`` (device work too)."""
        with self.ctx.phase(PHASES[kind]):
            start = time.perf_counter() - self.t0
            yield
            synchronize(self.ctx.device)
            end = time.perf_counter() - self.t0
        self.events.append((kind, micro, start, end))

    def last_micro(self, kind: str) -> int:
        return next((m for k, m, _, _ in reversed(self.events) if k == kind), 0)

    def finish(self) -> float:
        """Measured bubble fraction of the step (a collective: every stage must call it); puts
        it and this stage's events into the step's record."""
        busy = sum(end - start for _, _, start, end in self.events)
        first = min((s for _, _, s, _ in self.events), default=0.0)
        last = max((e for _, _, _, e in self.events), default=0.0)
        mine = torch.tensor([first, last, busy], dtype=torch.float64, device=self.ctx.device)
        spans = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(spans, mine)
        spans = [tuple(s.tolist()) for s in spans]
        bubble = bubble_fraction(spans)
        origin = min(first for first, _, _ in spans)   # the step's first compute, any stage
        self.ctx.extra["bubble_fraction"] = bubble
        self.ctx.extra["timeline"] = [[k, m, s - origin, e - origin] for k, m, s, e in self.events]
        return bubble


def one_clock(ctx) -> bool:
    """True when every rank runs on this host (asked once per run): ``time.perf_counter`` is
    then the system's monotonic clock in all of them, and their times compare directly."""
    if getattr(ctx, "one_clock", None) is None:
        hosts = [None] * dist.get_world_size()
        dist.all_gather_object(hosts, socket.gethostname())
        ctx.one_clock = len(set(hosts)) == 1 and sys.platform in ("linux", "darwin")
    return ctx.one_clock


# ---- drawing ------------------------------------------------------------------------------------

def step_events(records: list[dict], step: int) -> dict[int, list]:
    """Stage (rank) -> its ``[kind, micro-batch, start, end]`` events at ``step``."""
    return {r["rank"]: r["timeline"] for r in records
            if r["step"] == step and r.get("timeline") is not None}


def gantt(events: dict[int, list], title: str = "Measured pipeline timeline",
          bubble: float | None = None, fig: go.Figure | None = None) -> go.Figure:
    """One row per stage, one bar per forward (blue) or backward (orange), labelled with its
    micro-batch. Gaps between bars are the bubble: the stage had nothing to do."""
    fig = fig if fig is not None else go.Figure()
    traces = []
    for kind in ("F", "B"):
        rows = [(stage, m, s, e) for stage, evs in sorted(events.items())
                for k, m, s, e in evs if k == kind]
        traces.append(dict(
            x=[(e - s) * 1e3 for _, _, s, e in rows], base=[s * 1e3 for _, _, s, _ in rows],
            y=[f"stage {stage}" for stage, _, _, _ in rows], text=[str(m) for _, m, _, _ in rows],
            name=PHASES[kind]))
    if len(fig.data) == 2:   # a figure made here before: update it (a live FigureWidget)
        with fig.batch_update():
            for trace, values in zip(fig.data, traces):
                trace.update(values)
            fig.layout.title.text = _title(title, bubble)
        return fig
    for kind, values in zip(("F", "B"), traces):
        fig.add_bar(orientation="h", marker_color=COLORS[kind], textposition="inside",
                    insidetextanchor="middle", **values)
    stages = sorted(events) or [0]
    fig.update_layout(title=_title(title, bubble), barmode="overlay", height=150 + 50 * len(stages),
                      xaxis_title="ms since the step's first compute",
                      yaxis=dict(autorange="reversed", categoryorder="array",
                                 categoryarray=[f"stage {s}" for s in stages]),
                      template="plotly_white", margin=dict(l=70, r=20, t=60, b=45))
    return fig


def _title(title: str, bubble: float | None) -> str:
    return title if bubble is None else f"{title}: bubble {bubble:.0%} of the stage time"


def live_gantt(run, every_s: float = 0.3) -> dict:
    """Show a Gantt chart of the latest complete step, redrawn while ``run`` trains; return the
    run's summary when it ends."""
    from IPython.display import display

    spec, fig, shown, last = run.spec, go.FigureWidget(), -1, 0.0
    display(fig)
    for record in run:
        step = record["step"]
        events = step_events(run.records, step)
        if len(events) == spec.world_size and step > shown and time.monotonic() - last > every_s:
            gantt(events, f"Step {step}", record.get("bubble_fraction"), fig=fig)
            shown, last = step, time.monotonic()
    summary = run.wait()
    final = summary["steps"] - 1 + summary["first_step"]
    events = step_events(run.records, final)
    if events:
        bubble = next(r.get("bubble_fraction") for r in run.records if r["step"] == final)
        gantt(events, f"Step {final} (last)", bubble, fig=fig)
    return summary


def bubble_figure(measured: dict[int, float], stages: int,
                  title: str = "Pipeline bubble: measured vs (p-1)/(m+p-1)") -> go.Figure:
    """Measured bubble fraction per number of micro-batches m, on the theoretical curve."""
    ms = sorted(measured)
    curve = list(range(1, max(ms) + 1))
    fig = go.Figure(go.Scatter(x=curve, y=[theoretical_bubble(stages, m) for m in curve],
                               mode="lines", name=f"theory, p={stages}",
                               line=dict(dash="dash", color="gray")))
    fig.add_scatter(x=ms, y=[measured[m] for m in ms], mode="markers+text", name="measured",
                    text=[f"{measured[m]:.2f}" for m in ms], textposition="top center",
                    marker=dict(size=10))
    fig.update_layout(title=title, xaxis_title="micro-batches m", template="plotly_white",
                      yaxis=dict(title="bubble fraction", rangemode="tozero"), height=360)
    return fig


def activations_figure(summaries: dict[str, dict],
                       title: str = "Measured activation memory per stage") -> go.Figure:
    """Grouped bars: for each labelled pipeline run, the activations each stage (rank) held."""
    fig = go.Figure()
    for label, summary in summaries.items():
        held = summary["mem_by_category"]["activations"]
        fig.add_bar(x=[f"stage {s}" for s in range(len(held))], y=[(b or 0) / 1e6 for b in held],
                    name=label)
    fig.update_layout(title=title, yaxis_title="MB", barmode="group", template="plotly_white",
                      height=360)
    return fig


def handoff_s(events: dict[int, list]) -> float | None:
    """Shortest time, over micro-batches, from a stage ending a forward to the next stage
    starting it: what handing one micro-batch over costs when the next stage is waiting."""
    ends = {(stage, m): e for stage, evs in events.items() for k, m, _, e in evs if k == "F"}
    gaps = [s - ends[(stage - 1, m)] for stage, evs in events.items() for k, m, s, _ in evs
            if k == "F" and (stage - 1, m) in ends]
    return min(gaps) if gaps else None
