"""Lesson 03's picture of the ZeRO stages, drawn from the code that shards: which strategy shards
what (``Strategy.shards``) and which slice of each unit a rank owns (``FlatShard`` over
``unit_parameters``, as ZeRO's ranks cut the model)."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...models import build_model
from ...parallel import get_strategy
from ...parallel.base import STATES
from ...parallel.sharding.flat import FlatShard, unit_parameters
from ...ui.style import COLOURS, TEMPLATE

DRAWN = ("ddp", "zero1", "zero2", "zero3")   # the strategies the picture compares
LABELS = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer state"}


def held_ranges(spec, world: int, strategy: str) -> dict:
    """``{(rank, state): [(start, end), ...]}``: the stretches of the model's parameters (laid
    unit after unit, in millions) that ``strategy`` keeps of each state on each of ``world``
    ranks: the whole model, or in every unit the rank's slice of it."""
    units = [[p for p in group] for group in unit_parameters(build_model(spec, meta=True))]
    sizes = [sum(p.numel() for p in group) for group in units]
    total = sum(sizes)
    shards = get_strategy(strategy).shards
    out = {}
    for rank in range(world):
        slices, offset = [], 0
        for group, used in zip(units, sizes):
            flat = FlatShard(group, rank, world)
            start, end = min(flat.start, used), min(flat.start + flat.shard_numel, used)
            slices.append(((offset + start) / 1e6, (offset + end) / 1e6))
            offset += used
        for state in STATES:
            out[rank, state] = slices if state in shards else [(0.0, total / 1e6)]
    return out


def zero_schematic(spec, world: int = 4) -> go.Figure:
    """One panel per strategy (DDP, ZeRO-1, -2, -3) on ``world`` ranks: for each rank, which
    stretches of the model's parameters it keeps as parameters, gradients and optimizer state."""
    fig = make_subplots(rows=1, cols=len(DRAWN), shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[s.upper().replace("ZERO", "ZeRO-") if s != "ddp" else "DDP"
                                        for s in DRAWN])
    rows = [tr("rank {rank}", rank=r) + " · " + tr(LABELS[state])
            for r in range(world) for state in reversed(STATES)]
    for col, strategy in enumerate(DRAWN, start=1):
        held = held_ranges(spec, world, strategy)
        for state in reversed(STATES):
            spans = [(r, a, b) for r in range(world) for a, b in held[r, state] if b > a]
            fig.add_bar(orientation="h", base=[a for _, a, _ in spans],
                        x=[b - a for _, a, b in spans],
                        y=[tr("rank {rank}", rank=r) + " · " + tr(LABELS[state]) for r, _, _ in spans],
                        marker_color=COLOURS[state], name=tr(LABELS[state]), legendgroup=state,
                        showlegend=col == 1, row=1, col=col,
                        customdata=[[b - a, a, b] for _, a, b in spans],
                        hovertemplate=tr("%{customdata[0]:.3f} M parameters, from %{customdata[1]:.3f} M "
                                         "to %{customdata[2]:.3f} M") + "<extra></extra>")
    fig.update_yaxes(categoryorder="array", categoryarray=rows, autorange="reversed")
    fig.update_xaxes(title_text=tr("the model's parameters (M)"), row=1, col=1)
    fig.update_layout(barmode="overlay", height=140 + 22 * len(rows), template=TEMPLATE,
                      title=tr("What each of {n} ranks keeps: whole copies under DDP, a slice of "
                               "every unit where ZeRO shards", n=world),
                      margin=dict(l=200, r=20, t=80, b=90), legend=dict(orientation="h", y=-0.3))
    return fig
