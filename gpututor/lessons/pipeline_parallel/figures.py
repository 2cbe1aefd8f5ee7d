"""Charts of a pipeline's measured timeline: a Gantt chart per step (live while a run goes),
the measured bubble against theory, and activation memory per stage.

The records come from :class:`gpututor.parallel.pipeline.timeline.StageTimeline` in the ranks.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...parallel.pipeline.schedules import ideal_timeline
from ...parallel.pipeline.timeline import step_events, step_stages, theoretical_bubble_fraction
from ...ui.follow import UPDATE_INTERVAL_S, Follower
from ...ui.live_figure import LiveFigure
from ...ui.style import COLOURS, SERIES, TEMPLATE

COLORS = {"F": COLOURS["forward"], "B": COLOURS["backward"], "W": COLOURS["weights"]}
NAMES = {"F": "forward", "B": "backward", "W": "weight gradient (zero bubble)"}   # shown via tr()


def gantt(events: dict[int, list], title: str = "Measured pipeline timeline",
          bubble: float | None = None, fig: go.Figure | None = None,
          stages: dict[int, list] | None = None) -> go.Figure:
    """One row per stage, one bar per forward (blue) or backward (orange; a zero-bubble
    schedule's separate weight-gradient pass green), labelled with its micro-batch. With
    ``stages`` (:func:`~gpututor.parallel.pipeline.timeline.step_stages`: several model chunks
    per rank), a rank's later chunks are drawn lighter and hovering names the virtual stage.
    Gaps between bars are the bubble: the stage had nothing to do."""
    fig = fig if fig is not None else go.Figure()
    kinds = ("F", "B", "W") if any(ev[0] == "W" for evs in events.values() for ev in evs) \
        else ("F", "B")
    chunk = {rank: (stages or {}).get(rank) or [rank] * len(evs) for rank, evs in events.items()}
    traces = []
    for kind in kinds:
        rows = [(rank, m, s, e, v) for rank, evs in sorted(events.items())
                for (k, m, s, e), v in zip(evs, chunk[rank]) if k == kind]
        traces.append(dict(
            x=[(e - s) * 1e3 for _, _, s, e, _ in rows], base=[s * 1e3 for _, _, s, _, _ in rows],
            y=[tr("stage {stage}", stage=rank) for rank, *_ in rows],
            text=[str(m) for _, m, *_ in rows],
            hovertext=[tr("virtual stage {stage}, micro-batch {micro_batch}", stage=v,
                          micro_batch=m) if stages else
                       tr("stage {stage}, micro-batch {micro_batch}", stage=v, micro_batch=m)
                       for _, m, _, _, v in rows],
            marker_opacity=[1.0 if v == rank else 0.55 for rank, *_, v in rows],
            name=tr(NAMES[kind])))
    if len(fig.data) == len(traces):   # a figure made here before: update it (the live chart's)
        with fig.batch_update():
            for trace, values in zip(fig.data, traces):
                trace.update(values)
            fig.layout.title.text = _title(title, bubble)
        return fig
    fig.data = []
    for kind, values in zip(kinds, traces):
        fig.add_bar(orientation="h", marker_color=COLORS[kind], textposition="inside",
                    insidetextanchor="middle", **values)
    ranks = sorted(events) or [0]
    fig.update_layout(title=_title(title, bubble), barmode="overlay", height=150 + 50 * len(ranks),
                      xaxis_title=tr("ms since the step's first compute"),
                      yaxis=dict(autorange="reversed", categoryorder="array",
                                 categoryarray=[tr("stage {stage}", stage=s) for s in ranks]),
                      template=TEMPLATE, margin=dict(l=70, r=20, t=60, b=45))
    return fig


def _title(title: str, bubble: float | None) -> str:
    if bubble is None:
        return tr(title)
    return tr("{title}: bubble {bubble:.0%} of the stage time", title=tr(title), bubble=bubble)


def live_gantt(run, every_s: float = UPDATE_INTERVAL_S) -> dict:
    """Show a Gantt chart of the latest complete step, redrawn while ``run`` trains (the first
    complete step at once, then at most every ``every_s`` seconds: ``Follower.follow``); return
    the run's summary when it ends. The chart is a plain ``go.Figure`` drawn by a
    :class:`~gpututor.ui.live_figure.LiveFigure` (canvases, not plotly.js: the view costs the
    ranks next to nothing)."""
    from IPython.display import display

    spec, fig, view = run.spec, go.Figure(), LiveFigure()
    state = {"shown": -1, "newest": None}   # the step drawn; the newest complete step
    display(view)

    def on_record(record):
        step = record["step"]
        if step > state["shown"] and len(step_events(run.records, step)) == spec.world_size:
            state["newest"] = record

    def draw():
        record = state["newest"]
        if record is None or record["step"] <= state["shown"]:
            return
        step = record["step"]
        gantt(step_events(run.records, step), tr("Step {step}", step=step),
              record.get("bubble_fraction"), fig=fig, stages=step_stages(run.records, step))
        view.show(fig)
        state["shown"] = step

    Follower.follow(run, draw, ready=lambda: state["newest"] is not None,
                    on_record=on_record, interval=every_s)
    summary = run.wait()
    final = summary["steps"] - 1 + summary["first_step"]
    events = step_events(run.records, final)
    if events:
        bubble = next(r.get("bubble_fraction") for r in run.records if r["step"] == final)
        gantt(events, tr("Step {step} (last)", step=final), bubble, fig=fig,
              stages=step_stages(run.records, final))
        view.show(fig)
    return summary


def bubble_figure(measured: dict[int, float], stages: int,
                  title: str = "Pipeline bubble: measured vs (p-1)/(m+p-1)") -> go.Figure:
    """Measured bubble fraction per number of micro-batches m, on the theoretical curve."""
    ms = sorted(measured)
    curve = list(range(1, max(ms) + 1))
    fig = go.Figure(go.Scatter(x=curve, y=[theoretical_bubble_fraction(stages, m) for m in curve],
                               mode="lines", name=tr("theory, p={p}", p=stages),
                               line=dict(dash="dash", color="gray")))
    fig.add_scatter(x=ms, y=[measured[m] for m in ms], mode="markers+text", name=tr("measured"),
                    text=[f"{measured[m]:.2f}" for m in ms], textposition="top center",
                    marker=dict(size=10))
    top = max([measured[m] for m in ms] + [theoretical_bubble_fraction(stages, 1)])
    fig.update_layout(title=tr(title), xaxis_title=tr("micro-batches m"), template=TEMPLATE,
                      yaxis=dict(title=tr("bubble fraction"), range=[0, top * 1.2]), height=360)
    return fig


def activations_figure(summaries: dict[str, dict],
                       title: str = "Measured activation memory per stage") -> go.Figure:
    """Grouped bars: for each labelled pipeline run, the activations each stage (rank) held."""
    fig = go.Figure()
    for label, summary in summaries.items():
        held = summary["mem_by_category"]["activations"]
        fig.add_bar(x=[tr("stage {stage}", stage=s) for s in range(len(held))],
                    y=[None if b is None else b / 1e6 for b in held], name=label)
    fig.update_layout(title=tr(title), yaxis_title="MB", barmode="group", template=TEMPLATE,
                      height=360)
    return fig


def schedules_figure(rows: dict[str, dict],
                     title: str = "Measured bubble per schedule, against the theory") -> go.Figure:
    """One bar per schedule: the measured bubble, split into what the stages' compute left
    idle (the bubble with free hand-offs, ``free``) and what handing over added
    (``measured - free``); a marker for the theory (none where it is None). ``rows``: name ->
    ``{"measured": ..., "free": ... or None, "theory": ... or None}``, as
    :func:`gpututor.lessons.pipeline_parallel.bubble.bubble_parts` gives them."""
    names = list(rows)
    free = [rows[n].get("free") for n in names]
    handoff = [None if f is None else rows[n]["measured"] - f for n, f in zip(names, free)]
    fig = go.Figure()
    fig.add_bar(x=names, y=[rows[n]["measured"] if f is None else f for n, f in zip(names, free)],
                name=tr("with free hand-offs (replayed)"), marker_color=SERIES[0])
    fig.add_bar(x=names, y=handoff, name=tr("added by handing over"), marker_color=SERIES[1])
    fig.add_scatter(x=names, y=[rows[n].get("theory") for n in names], mode="markers",
                    name=tr("theory"), marker=dict(symbol="line-ew-open", size=28, color="black",
                                                   line=dict(width=3)))
    fig.update_layout(title=tr(title), barmode="stack", template=TEMPLATE, height=400,
                      yaxis=dict(title=tr("bubble fraction"), rangemode="tozero"))
    return fig


def implementations_figure(pairs: dict[str, tuple[dict, dict]],
                           title: str = "From scratch against torch.distributed.pipelining"
                           ) -> go.Figure:
    """Per schedule, the step time (left) and the measured bubble (right) of the from-scratch
    run and of ``pp-torch``'s. ``pairs``: schedule -> (from-scratch summary, pp-torch summary)."""
    names = list(pairs)
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("step time (ms)"),
                                                         tr("bubble fraction")))
    for i, (label, color) in enumerate(((tr("from scratch"), SERIES[0]), ("pp-torch", SERIES[3]))):
        fig.add_bar(x=names, y=[pairs[n][i]["step_time_s"] * 1e3 for n in names], name=label,
                    marker_color=color, legendgroup=label, row=1, col=1)
        fig.add_bar(x=names, y=[pairs[n][i]["bubble_fraction"] for n in names], name=label,
                    marker_color=color, legendgroup=label, showlegend=False, row=1, col=2)
    fig.update_layout(title=tr(title), barmode="group", template=TEMPLATE, height=360)
    return fig


def kept_at_once(events: dict[int, list], stage: int) -> int:
    """The most micro-batches whose forward has ended and backward not yet ended on ``stage``:
    how many micro-batches' activations it keeps at once (a backward frees its micro-batch's
    when it ends; at equal times the keeping counts first)."""
    ends = sorted([(e, -1) for k, _, _, e in events[stage] if k == "F"] +
                  [(e, 1) for k, _, _, e in events[stage] if k == "B"])
    kept = most = 0
    for _, change in ends:
        kept -= change
        most = max(most, kept)
    return most


def schedule_schematic(schedule: str, stages: int = 4, m: int = 8) -> go.Figure:
    """The order of ``schedule`` (GPipe's or 1F1B's own function) on ``stages`` stages and ``m``
    micro-batches, drawn as its Gantt chart on an ideal machine (a forward takes one unit, a
    backward two, hand-offs are free: ``ideal_timeline``); the title gives the idle share and the
    most micro-batches stage 0 keeps at once."""
    events = ideal_timeline(schedule, stages, m)
    span = max(e for evs in events.values() for *_, e in evs)
    busy = sum(e - s for evs in events.values() for *_, s, e in evs)
    units = {r: [(k, i, s / 1e3, e / 1e3) for k, i, s, e in evs] for r, evs in events.items()}
    name = {"gpipe": "GPipe", "1f1b": "1F1B"}[schedule]
    fig = gantt(units, tr("{name}, {stages} stages, m={m}: idle {idle:.0%}; stage 0 keeps up to "
                          "{kept} micro-batches", name=name, stages=stages, m=m,
                          idle=1 - busy / (stages * span), kept=kept_at_once(events, 0)))
    fig.update_layout(xaxis_title=tr("time, in forwards of one micro-batch (a backward takes two)"))
    return fig
