"""Lesson 02's schematic of the ring all-reduce, drawn from the schedule the package's ring
follows (``gpututor.parallel.data_parallel.ring.ring_schedule``): the picture cannot disagree with
the code that runs."""
from __future__ import annotations

import plotly.graph_objects as go

from ...i18n import tr
from ...parallel.data_parallel.ring import ring_schedule
from ...ui.style import SERIES, TEMPLATE


def ring_figure(world: int = 4) -> go.Figure:
    """One column per step of the ring on ``world`` ranks, one row per rank: the chunk each rank
    sends to its right neighbour at that step (its colour: the chunk), with what it does with
    the chunk arriving from the left (added in the reduce-scatter, copied in the all-gather)."""
    steps = ring_schedule(world)
    columns = [tr("{phase} {k}", phase=tr(s["phase"]), k=s["step"] + 1) for s in steps]
    ranks = [tr("rank {rank}", rank=r) for r in range(world)]
    sends = [[s["send"][r] for s in steps] for r in range(world)]
    text = [[tr("chunk {send} → rank {right}", send=s["send"][r], right=(r + 1) % world) for s in steps]
            for r in range(world)]
    hover = [[tr("rank {rank} sends chunk {send} to rank {right} and {what} chunk {recv} from rank "
                 "{left}", rank=r, send=s["send"][r], right=(r + 1) % world,
                 recv=s["recv"][r], left=(r - 1) % world,
                 what=tr("adds") if s["phase"] == "reduce-scatter" else tr("copies"))
              for s in steps] for r in range(world)]
    scale = [[i / max(world - 1, 1), SERIES[i % len(SERIES)]] for i in range(world)]
    fig = go.Figure(go.Heatmap(z=sends, x=columns, y=ranks, text=text, texttemplate="%{text}",
                               customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                               colorscale=scale, zmin=0, zmax=world - 1, showscale=False,
                               xgap=3, ygap=3))
    fig.add_vline(x=world - 1.5, line_width=3, line_color="#57606a")
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=tr("Ring all-reduce on {n} ranks: the chunk each rank sends at each "
                               "step (colour: the chunk)", n=world),
                      height=90 + 55 * world, margin=dict(l=70, r=20, t=60, b=40),
                      template=TEMPLATE)
    return fig
