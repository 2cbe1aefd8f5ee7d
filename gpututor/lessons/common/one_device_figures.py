"""Figures of lessons 01b and 01c: attention against the sequence length, recomputation, offload
and what fits a capacity (01b); the levers before and after (01c)."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...ui.style import TEMPLATE, colours_for
from ...formulas import MB



def attention_figure(rows: list[dict]) -> go.Figure:
    """Two panels against the sequence length: what forward keeps for backward (MB), and the
    time of forward + backward (ms), one line per way of computing attention."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        tr("kept for backward (MB, measured)"), tr("forward + backward (ms, measured)")))
    colours = colours_for(r["way"] for r in rows)   # a way's two lines in its one colour
    for way, colour in colours.items():
        mine = sorted((r for r in rows if r["way"] == way), key=lambda r: r["seq_len"])
        x = [r["seq_len"] for r in mine]
        style = dict(mode="lines+markers", name=tr(way), legendgroup=way,
                     line=dict(color=colour), marker=dict(color=colour))
        fig.add_scatter(x=x, y=[r["saved_bytes"] / MB for r in mine], row=1, col=1, **style)
        fig.add_scatter(x=x, y=[r["seconds"] * 1e3 for r in mine], row=1, col=2,
                        showlegend=False, **style)
    lengths = sorted({r["seq_len"] for r in rows})   # ticks at the lengths measured
    fig.update_xaxes(title_text=tr("sequence length T"), type="log", tickvals=lengths,
                     ticktext=[str(t) for t in lengths])
    fig.update_yaxes(type="log")
    fig.update_layout(title=tr("Attention three ways, on this machine"), height=380,
                      template=TEMPLATE)
    return fig


def recomputation_figure(rows: list[dict]) -> go.Figure:
    """Bars per policy: bytes kept for backward, and the step's time."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("kept for backward (MB)"),
                                                                  tr("step (ms)")))
    names = [tr(r["policy"]) for r in rows]
    fig.add_bar(x=names, y=[r["saved_bytes"] / MB for r in rows], row=1, col=1, showlegend=False)
    fig.add_bar(x=names, y=[r["seconds"] * 1e3 for r in rows], row=1, col=2, showlegend=False)
    fig.update_layout(title=tr("Recomputation policies, measured"), height=340,
                      template=TEMPLATE)
    return fig


def offload_figure(result: dict) -> go.Figure:
    """One stacked bar per way: the step's measured time, and the part an emulated link added
    (a sleep, labelled as emulation)."""
    names = list(result)
    labels = [tr(n) for n in names]
    emulated = [result[n]["emulated_s"] * 1e3 for n in names]
    fig = go.Figure()
    fig.add_bar(x=labels, y=[result[n]["step_s"] * 1e3 - e for n, e in zip(names, emulated)],
                name=tr("measured here"))
    if any(emulated):
        fig.add_bar(x=labels, y=emulated, name=tr("emulated link (a sleep, not measured)"),
                    marker_pattern_shape="/")
    fig.update_layout(barmode="stack",
                      title=tr("One training step, optimizer on the device or the host"),
                      yaxis_title=tr("ms per step (median of the steps after the first)"), height=360, template=TEMPLATE)
    return fig


def levers_figure(rows: list[dict]) -> go.Figure:
    """Before and after: tokens/s and peak memory per configuration; "not measured" where a
    configuration's memory could not be probed."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("tokens/s (measured)"),
                                                        tr("peak memory (MB, measured)")))
    names = [tr(r["name"]) for r in rows]
    fig.add_bar(x=names, y=[r["tokens_per_s"] for r in rows], row=1, col=1, showlegend=False)
    peaks = [r["peak_bytes"] / MB if r["peak_bytes"] is not None else None for r in rows]
    fig.add_bar(x=names, y=peaks, row=1, col=2, showlegend=False,
                text=[tr("not measured") if p is None else f"{p:.1f}" for p in peaks],
                textposition="outside")
    fig.update_layout(title=tr("One device, before and after the levers"), height=380,
                      template=TEMPLATE)
    return fig


def capacity_figure(rows: list[dict], capacity: int) -> go.Figure:
    """Peak memory of one step per model size and configuration, against the capacity; a bar
    that did not fit shows what the step tried to hold when it failed."""
    fig = go.Figure()
    for name in dict.fromkeys(r["name"] for r in rows):
        mine = [r for r in rows if r["name"] == name]
        fig.add_bar(x=[f"{tr(r['model_size'])} ({r['parameters'] / 1e6:.2f} M)" for r in mine],
                    y=[r["peak_bytes"] / MB for r in mine], name=tr(name),
                    text=[tr("fits") if r["fits"] else tr("out of memory") for r in mine],
                    textposition="outside", cliponaxis=False)
    fig.add_hline(y=capacity / MB, line_dash="dash", annotation_position="top left",
                  annotation_text=tr("capacity {mb:.0f} MB", mb=capacity / MB))
    top = max([r["peak_bytes"] / MB for r in rows] + [capacity / MB])
    fig.update_yaxes(range=[0, top * 1.2])   # room above the tallest bar for its label
    fig.update_layout(barmode="group", title=tr("What fits one device of this capacity"),
                      yaxis_title=tr("MB (peak of a step, or held when it failed)"), height=380,
                      template=TEMPLATE)
    return fig
