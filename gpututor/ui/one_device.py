"""Figures of lesson 10: attention's cost against the sequence length, recomputation policies."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

MB = 1e6


def attention_figure(rows: list[dict]) -> go.Figure:
    """Two panels against the sequence length: what forward keeps for backward (MB), and the
    time of forward + backward (ms), one line per way of computing attention."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "kept for backward (MB, measured)", "forward + backward (ms, measured)"))
    for i, way in enumerate(dict.fromkeys(r["way"] for r in rows)):
        mine = sorted((r for r in rows if r["way"] == way), key=lambda r: r["seq_len"])
        x = [r["seq_len"] for r in mine]
        style = dict(mode="lines+markers", name=way, legendgroup=way)
        fig.add_scatter(x=x, y=[r["saved_bytes"] / MB for r in mine], row=1, col=1, **style)
        fig.add_scatter(x=x, y=[r["seconds"] * 1e3 for r in mine], row=1, col=2,
                        showlegend=False, **style)
    fig.update_xaxes(title_text="sequence length T", type="log")
    fig.update_yaxes(type="log")
    fig.update_layout(title="Attention three ways, on this machine", height=380,
                      template="plotly_white")
    return fig


def recomputation_figure(rows: list[dict]) -> go.Figure:
    """Bars per policy: bytes kept for backward, and the step's time."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("kept for backward (MB)", "step (ms)"))
    names = [r["policy"] for r in rows]
    fig.add_bar(x=names, y=[r["saved_bytes"] / MB for r in rows], row=1, col=1, showlegend=False)
    fig.add_bar(x=names, y=[r["seconds"] * 1e3 for r in rows], row=1, col=2, showlegend=False)
    fig.update_layout(title="Recomputation policies, measured", height=340, template="plotly_white")
    return fig
