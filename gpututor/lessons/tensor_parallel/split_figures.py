"""Lesson 04's picture of Megatron's MLP split, drawn from the code that splits:
``owned_indices``, which ``ColumnParallelLinear`` and ``RowParallelLinear`` use to pick a rank's
output features (columns of ``A``) and input features (rows of ``B``)."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...parallel.tensor_parallel.megatron import owned_indices
from ...parallel.tensor_parallel.tp_communications import TensorParallelGroup
from ...ui.style import SERIES, TEMPLATE


def owners(features: int, tp: int) -> list[int]:
    """The rank that owns each of ``features`` under the split of ``owned_indices``."""
    owner = [0] * features
    for rank in range(tp):
        for i in owned_indices(features, TensorParallelGroup(rank, tp)).tolist():
            owner[i] = rank
    return owner


def split_schematic(d_model: int = 8, hidden: int = 16, tp: int = 2) -> go.Figure:
    """``Z = GELU(X A) B`` on ``tp`` ranks: every entry of ``A`` (``d_model × hidden``), of
    ``Y = GELU(X A)`` (a few tokens × ``hidden``) and of ``B`` (``hidden × d_model``) coloured by the
    rank that holds or computes it: ``A`` by columns, so each rank computes its columns of ``Y``
    with no communication; ``B`` by rows, so each rank's product is a partial ``Z``, and one
    all-reduce sums them."""
    by_hidden = owners(hidden, tp)
    a = [by_hidden for _ in range(d_model)]             # A[i, j]: owner of column j
    y = [by_hidden for _ in range(4)]                   # Y[t, j]: computed where column j is
    b = [[by_hidden[i]] * d_model for i in range(hidden)]   # B[i, j]: owner of row i
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, column_widths=[0.4, 0.4, 0.2],
                        subplot_titles=(tr("A ({rows} × {cols}): split by columns", rows=d_model, cols=hidden),
                                        tr("Y = GELU(X A) ({rows} × {cols}): each rank its columns, no "
                                           "communication", rows=4, cols=hidden),
                                        tr("B ({rows} × {cols}): split by rows", rows=hidden, cols=d_model)))
    scale = [[r / max(tp - 1, 1), SERIES[r % len(SERIES)]] for r in range(tp)]
    for col, z in enumerate((a, y, b), start=1):
        fig.add_heatmap(z=z, colorscale=scale, zmin=0, zmax=max(tp - 1, 1), showscale=False,
                        xgap=1, ygap=1, row=1, col=col,
                        text=[[tr("rank {rank}", rank=v) for v in row] for row in z],
                        hovertemplate="%{text}<extra></extra>")
    for rank in range(tp):   # the legend: which colour is which rank
        fig.add_scatter(x=[None], y=[None], mode="markers", name=tr("rank {rank}", rank=rank),
                        marker=dict(color=SERIES[rank % len(SERIES)], size=12, symbol="square"),
                        row=1, col=1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(title=tr("Megatron's MLP on {tp} ranks (colour: the rank that holds or computes "
                               "it)", tp=tp) + "<br><sup>" + tr("each rank's Y times its rows of B is a "
                               "partial Z: one all-reduce sums them") + "</sup>",
                      height=380, template=TEMPLATE, margin=dict(l=20, r=20, t=100, b=20),
                      xaxis=dict(showgrid=False, zeroline=False), yaxis=dict(showgrid=False, zeroline=False))
    return fig
