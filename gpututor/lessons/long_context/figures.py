"""Figures of lesson 10: which rank keeps each position and causal attention's work per rank, by
split; activations against the sequence length with and without context parallel."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...ui.style import COLOURS, TEMPLATE
from ...formulas import MB
from .verdicts import split_label


def positions_figure(positions: dict) -> go.Figure:
    """``positions``: ``{split: n × T/n positions}`` (``split_positions``); one row per split,
    one cell per position of the sequence, coloured and labelled by the rank that keeps it."""
    splits = list(positions)
    seq_len = max(int(p.max()) for p in positions.values()) + 1
    owner = {split: [0] * seq_len for split in splits}
    for split, rows in positions.items():
        for rank, row in enumerate(rows.tolist()):
            for position in row:
                owner[split][position] = rank
    z = [owner[split] for split in splits]
    fig = go.Figure(go.Heatmap(z=z, x=list(range(seq_len)), y=[split_label(s) for s in splits],
                               text=[[str(r) for r in row] for row in z], texttemplate="%{text}",
                               colorscale="Blues", showscale=False, xgap=2, ygap=4,
                               hovertemplate=tr("position %{x}: rank %{z}") + "<extra></extra>"))
    fig.update_layout(title=tr("Which rank keeps each position (the number in each cell)"),
                      xaxis_title=tr("position in the sequence"), height=220, template=TEMPLATE)
    return fig


def work_figure(works: dict) -> go.Figure:
    """``works``: ``{(split, n): [pairs per rank]}``; one panel per ``n``, bars per rank."""
    sizes = sorted({n for _, n in works})
    fig = make_subplots(rows=1, cols=len(sizes),
                        subplot_titles=[tr("{n} ranks", n=n) for n in sizes])
    for col, n in enumerate(sizes, start=1):
        for split in dict.fromkeys(s for s, _ in works):
            if (split, n) in works:
                fig.add_bar(x=list(range(n)), y=works[(split, n)],
                            name=split_label(split), marker_color=COLOURS[split],
                            legendgroup=split, showlegend=col == 1, row=1, col=col)
        fig.update_xaxes(title_text=tr("rank"), tickmode="array", tickvals=list(range(n)),
                         row=1, col=col)
    fig.update_yaxes(title_text=tr("visible query-key pairs"), row=1, col=1)
    fig.update_layout(title=tr("Causal attention's work per rank: contiguous and zig-zag splits"),
                      barmode="group", height=360, template=TEMPLATE)
    return fig


def activations_figure(rows: list[dict]) -> go.Figure:
    """Rank 0's activation bytes (measured) against the sequence length, one line per layout."""
    fig = go.Figure()
    for layout in dict.fromkeys(r["layout"] for r in rows):
        mine = sorted((r for r in rows if r["layout"] == layout), key=lambda r: r["seq_len"])
        fig.add_scatter(x=[r["seq_len"] for r in mine], y=[r["activations"] / MB for r in mine],
                        mode="lines+markers", name=tr(layout))
    fig.update_layout(title=tr("Activations kept for backward by rank 0 (measured)"),
                      xaxis_title=tr("sequence length T"), yaxis_title="MB", height=360,
                      template=TEMPLATE)
    return fig
