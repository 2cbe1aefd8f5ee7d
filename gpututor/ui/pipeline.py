"""Charts of a pipeline's measured timeline: a Gantt chart per step (live while a run goes),
the measured bubble against theory, and activation memory per stage.

The records come from :class:`gpututor.parallel.pipeline.timeline.StageTimeline` in the ranks.
"""
from __future__ import annotations

import time

import plotly.graph_objects as go

from ..parallel.pipeline.timeline import PHASES, step_events, theoretical_bubble_fraction

COLORS = {"F": "#4c78a8", "B": "#f58518"}


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
    fig = go.Figure(go.Scatter(x=curve, y=[theoretical_bubble_fraction(stages, m) for m in curve],
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
        fig.add_bar(x=[f"stage {s}" for s in range(len(held))], y=[None if b is None else b / 1e6 for b in held],
                    name=label)
    fig.update_layout(title=title, yaxis_title="MB", barmode="group", template="plotly_white",
                      height=360)
    return fig
