"""Lesson 09's figures: the rank grid drawn as groups, measured memory per rank per layout, and
the planner's predictions beside the measured peaks. Also the ddp+tp step's timeline, its
all-reduces named by kind."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...measure.memory import CATEGORIES
from ...parallel.mesh import RankGrid
from ...plan.layouts import HEADROOM
from ...ui import step_timeline as timelines   # the module: its function here would pass for ours
from ...ui.style import SERIES, TEMPLATE
from ...formulas import MB
from .timeline import ALL_REDUCE_NAMES, labelled_records

GRID_LAYOUT = dict(template=TEMPLATE, margin=dict(l=60, r=20, t=70, b=50))   # no fixed height


def grid_figure(grid: RankGrid, title: str = "") -> go.Figure:
    """One panel per dim: every rank as a box, coloured by which group of that dim it is in."""
    dims = grid.dims
    fig = make_subplots(rows=1, cols=len(dims),
                        subplot_titles=[tr("{dim} groups ({n} ranks each)", dim=d, n=grid.degree(d))
                                        for d in dims])
    ranks = grid.ranks.reshape(-1, grid.ranks.shape[-1]) if grid.ranks.dim() > 1 else \
        grid.ranks.view(1, -1)
    for col, dim in enumerate(dims, start=1):
        which = {r: i for i, group in enumerate(grid.groups(dim)) for r in group}
        z = [[which[int(r)] for r in row] for row in ranks]
        text = [[tr("rank {rank}", rank=int(r)) for r in row] for row in ranks]
        fig.add_heatmap(z=z, text=text, texttemplate="%{text}", showscale=False,
                        colorscale="Viridis", row=1, col=col, hoverinfo="text")
        fig.update_yaxes(autorange="reversed", showticklabels=False, row=1, col=col)
        fig.update_xaxes(showticklabels=False, row=1, col=col)
    shape = " x ".join(f"{d}={n}" for d, n in grid.shape)
    fig.update_layout(title=tr(title) if title else
                      tr("Rank grid {shape}: same colour = same group", shape=shape),
                      height=160 + 60 * len(ranks), **GRID_LAYOUT)
    return fig


def memory_per_rank_figure(summaries: dict[str, dict], capacity: float | None = None,
                           title: str = "Measured memory per rank, by layout") -> go.Figure:
    """Stacked bars of the bytes each rank held (parameters, gradients, optimizer state,
    activations) and its measured peak, for each labelled run; ``capacity`` as a line."""
    x = [[tr(label) for label, s in summaries.items() for _ in range(s["world_size"])],
         [f"r{r}" for s in summaries.values() for r in range(s["world_size"])]]
    fig = go.Figure()
    for c in CATEGORIES:
        fig.add_bar(x=x, y=[(v or 0) / MB for s in summaries.values()
                            for v in s["mem_by_category"][c]], name=tr(c))
    fig.add_scatter(x=x, y=[(p or 0) / MB for s in summaries.values()
                            for p in s["peak_mem_bytes"]], mode="markers",
                    name=tr("peak (measured)"),
                    marker=dict(symbol="diamond", size=9, color="black"))
    if capacity:
        fig.add_hline(y=capacity / MB, line_dash="dash", line_color="#cf222e",
                      annotation_text=tr("capacity {mb:.1f} MB", mb=capacity / MB))
    fig.update_layout(barmode="stack", title=tr(title), yaxis_title=tr("MB per rank"), height=420,
                      legend=dict(orientation="h", y=-0.25), **GRID_LAYOUT)
    return fig


def prediction_figure(rows: list[dict], measured: dict[str, dict | None],
                      capacity: float) -> go.Figure:
    """Per layout of ``rows`` (``plan.layouts.predict_layouts``): the planner's predicted bytes
    per rank beside the largest measured peak of the run of that layout in ``measured`` (no bar
    where it was not run); ``capacity`` and the share of it the planner fills as lines."""
    names = [f"{r['layout']} " + "·".join(f"{d}{n}" for d, n in r["mesh"].items()) for r in rows]
    peaks = [max(measured[r["layout"]]["peak_mem_bytes"]) / MB if measured.get(r["layout"])
             else None for r in rows]
    fig = go.Figure()
    fig.add_bar(x=names, y=[r["total"] / MB for r in rows], name=tr("predicted (formula)"),
                text=[tr("fits") if r["fits"] else tr("does not fit") for r in rows],
                textposition="inside", insidetextanchor="start")   # at the foot: clear of the lines
    fig.add_bar(x=names, y=peaks, name=tr("largest peak (measured)"))
    fig.add_hline(y=capacity / MB, line_dash="dash", line_color="#cf222e",
                  annotation_text=tr("capacity {mb:.1f} MB", mb=capacity / MB))
    fig.add_hline(y=HEADROOM * capacity / MB, line_dash="dot", line_color="#9a6700",
                  annotation_text=tr("{share:.0%} of the capacity: the planner's limit",
                                     share=HEADROOM), annotation_position="bottom right")
    fig.update_layout(barmode="group", yaxis_title=tr("MB per rank"), height=420,
                      title=tr("The planner's prediction per layout, and the measured peak"),
                      legend=dict(orientation="h", y=-0.3), **GRID_LAYOUT)
    return fig


def composed_timeline_figure(records: list[dict], step: int) -> go.Figure:
    """Section 5's ``ddp+tp`` run, ``step`` on every rank on one clock (``step_timeline``), its
    all-reduces named and coloured by kind, data parallel's or tensor parallel's, as
    :func:`.timeline.composed_timeline_verdict` tells them apart."""
    fig = timelines.step_timeline(labelled_records(records, step), steps=[step],
                        title=tr("ddp+tp, step {step}, on one clock", step=step))
    for kind, colour in (("dp", SERIES[4]), ("tp", SERIES[3])):
        fig.update_traces(marker_color=colour, selector=dict(name=tr(ALL_REDUCE_NAMES[kind])))
    return fig
