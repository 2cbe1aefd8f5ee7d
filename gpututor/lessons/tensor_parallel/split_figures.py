"""Lesson 04's picture of Megatron's MLP split, drawn from the code that splits:
``owned_indices``, which ``ColumnParallelLinear`` and ``RowParallelLinear`` use to pick a rank's
output features (columns of ``A``) and input features (rows of ``B``), with Megatron's two
operators where they act: ``f`` in front of ``A`` (identity forward, all-reduce backward) and
``g`` behind ``B`` (all-reduce forward, identity backward) [ref: shoeybi2019-f-g]."""
from __future__ import annotations

import plotly.graph_objects as go

from ...i18n import tr
from ...parallel.tensor_parallel.megatron import owned_indices
from ...parallel.tensor_parallel.tp_communications import TensorParallelGroup
from ...ui.style import COLOURS, SERIES, TEMPLATE

EVERY_RANK = -1          # an entry every rank holds whole (X, and Z after the all-reduce)
TOKENS = 4               # rows of X, Y and Z: a few tokens
GAP, OPERATOR_GAP = 3, 12 # columns between two matrices; between two that f or g joins


def owners(features: int, tp: int) -> list[int]:
    """The rank that owns each of ``features`` under the split of ``owned_indices``."""
    owner = [0] * features
    for rank in range(tp):
        for i in owned_indices(features, TensorParallelGroup(rank, tp)).tolist():
            owner[i] = rank
    return owner


def panels(d_model: int, hidden: int, tp: int) -> list[dict]:
    """The matrices of ``Z = GELU(X A) B`` on ``tp`` ranks, left to right, each cell the rank that
    holds or computes it (:data:`EVERY_RANK`: all of them): ``name``, ``cells`` (rows of owners),
    ``top`` (its first row) and ``gap`` (columns before it; ``operator``: ``"f"`` or ``"g"`` acts
    in that gap)."""
    by_hidden = owners(hidden, tp)
    whole = [[EVERY_RANK] * d_model for _ in range(TOKENS)]
    out = [dict(name="X", cells=whole, top=0, gap=0),
           dict(name="A", cells=[by_hidden] * d_model, top=0, gap=OPERATOR_GAP, operator="f"),
           dict(name="Y", cells=[by_hidden] * TOKENS, top=0, gap=GAP),
           dict(name="B", cells=[[by_hidden[i]] * d_model for i in range(hidden)], top=0, gap=GAP)]
    for rank in range(tp):   # each rank's Y times its rows of B: a partial Z of full size
        out.append(dict(name=f"Z{rank}", cells=[[rank] * d_model] * TOKENS,
                        top=rank * (TOKENS + 1), gap=GAP if rank == 0 else None))
    middle = (tp * (TOKENS + 1) - 1) / 2           # Z level with g, halfway down the partials
    out.append(dict(name="Z", cells=whole, top=middle - TOKENS / 2, gap=OPERATOR_GAP, operator="g"))
    return out


def split_schematic(d_model: int = 8, hidden: int = 16, tp: int = 2) -> go.Figure:
    """``Z = GELU(X A) B`` on ``tp`` ranks, every entry coloured by the rank that holds or
    computes it, cells square: ``X`` whole on every rank; ``f``; ``A`` (``d_model × hidden``) by
    columns, so each rank computes its columns of ``Y = GELU(X A)`` with no communication; ``B``
    by rows, so each rank's ``Y B`` is a partial ``Z``; ``g``, the all-reduce that sums them into
    ``Z``, whole on every rank."""
    colour = {EVERY_RANK: COLOURS["other"], **{r: SERIES[r % len(SERIES)] for r in range(tp)}}
    who = {EVERY_RANK: tr("every rank")} | {r: tr("rank {rank}", rank=r) for r in range(tp)}
    titles = {"X": tr("X ({rows} × {cols})<br>whole on every rank", rows=TOKENS, cols=d_model),
              "A": tr("A ({rows} × {cols})<br>split by columns", rows=d_model, cols=hidden),
              "Y": tr("Y = GELU(X A) ({rows} × {cols})<br>each rank its columns", rows=TOKENS,
                      cols=hidden),
              "B": tr("B ({rows} × {cols})<br>split by rows", rows=hidden, cols=d_model),
              "Z0": tr("Y B on each rank:<br>a partial Z ({rows} × {cols})", rows=TOKENS,
                       cols=d_model),
              "Z": tr("Z ({rows} × {cols})<br>the sum, on every rank", rows=TOKENS, cols=d_model)}
    operators = {"f": tr("forward: identity<br>backward: all-reduce"),
                 "g": tr("forward: all-reduce<br>backward: identity")}
    # a step colour scale: value v (EVERY_RANK .. tp - 1) takes colour[v] over its whole band
    bands = tp + 1
    scale = [[(v + 1 + edge) / bands, colour[v]] for v in range(EVERY_RANK, tp) for edge in (0, 1)]
    fig, left = go.Figure(), 0
    for panel in panels(d_model, hidden, tp):
        if panel["gap"] is None:          # a further partial Z, under the first
            left = first_partial
        else:
            left += panel["gap"]
        if panel["name"] == "Z0":
            first_partial = left
        cells, top = panel["cells"], panel["top"]
        width = len(cells[0])
        fig.add_heatmap(z=cells, x0=left + 0.5, dx=1, y0=top + 0.5, dy=1, colorscale=scale,
                        zmin=EVERY_RANK, zmax=tp - 1, showscale=False, xgap=1, ygap=1,
                        text=[[f"{panel['name']}: {who[c]}" for c in row] for row in cells],
                        hovertemplate="%{text}<extra></extra>")
        if panel["name"] in titles:
            fig.add_annotation(x=left + width / 2, y=top - 0.6, text=titles[panel["name"]],
                               showarrow=False, yanchor="bottom", font=dict(size=11))
        if panel.get("operator"):
            name = panel["operator"]
            middle = TOKENS / 2 if name == "f" else (tp * (TOKENS + 1) - 1) / 2
            fig.add_annotation(x=left - 0.6, y=middle, ax=left - panel["gap"] + 0.6, ay=middle,
                               xref="x", yref="y", axref="x", ayref="y", text="",
                               showarrow=True, arrowhead=3, arrowwidth=1.5)
            fig.add_annotation(x=left - panel["gap"] / 2, y=middle - 0.4, yanchor="bottom",
                               text=f"<b>{name}</b>", showarrow=False, font=dict(size=15))
            fig.add_annotation(x=left - panel["gap"] / 2, y=middle + 0.6, yanchor="top",
                               text=operators[name], showarrow=False, font=dict(size=10))
        left += width
    for rank in [*range(tp), EVERY_RANK]:   # the legend: which colour is which
        fig.add_scatter(x=[None], y=[None], mode="markers", name=who[rank], legendgroup=str(rank),
                        marker=dict(color=colour[rank], size=12, symbol="square"))
    tall = max(hidden, tp * (TOKENS + 1))
    fig.update_xaxes(visible=False, range=[-3, left + 3])   # room for the titles at both ends
    fig.update_yaxes(visible=False, autorange="reversed", scaleanchor="x", range=[-4, tall + 0.5])
    fig.update_layout(title=tr("Megatron's MLP on {tp} ranks (colour: the rank that holds or "
                               "computes each entry)", tp=tp),
                      height=340, template=TEMPLATE, margin=dict(l=10, r=10, t=60, b=10),
                      legend=dict(orientation="h", y=-0.02, yanchor="top"), hovermode="closest")
    return fig
