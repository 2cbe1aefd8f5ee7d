"""Lesson 02's schematic of the ring all-reduce, drawn from the schedule the package's ring
follows (``gpututor.parallel.data_parallel.ring.ring_schedule``): the picture cannot disagree with
the code that runs."""
from __future__ import annotations

import plotly.graph_objects as go

from ...i18n import tr
from ...parallel.data_parallel.ring import ring_schedule
from ...ui.style import COLOURS, SERIES, TEMPLATE


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
    fig.add_annotation(text=tr("Drawn: the sends. In the same step each rank receives the chunk "
                               "the rank above it sends (rank 0: rank {last}'s),", last=world - 1)
                       + "<br>" + tr("and adds it in the reduce-scatter, copies it in the "
                                     "all-gather."), xref="paper", yref="paper", x=0, y=0,
                       yshift=-30, xanchor="left", yanchor="top", align="left", showarrow=False,
                       font=dict(size=12, color="#57606a"))
    fig.update_layout(title=tr("Ring all-reduce on {n} ranks: the chunk each rank sends at each "
                               "step (colour: the chunk)", n=world),
                      height=140 + 55 * world, margin=dict(l=70, r=20, t=60, b=85),
                      template=TEMPLATE)
    return fig


def scaling_figure(rows: list[dict], expected: dict) -> go.Figure:
    """Strong scaling as bars: each measured speedup over one rank here (``rows``:
    ``ui.series.speedup_rows``), and beside them the planner's expectation for GPUs of the
    catalogue (``expected``: :func:`~.expected.planner_speedup`), drawn hatched and grey and
    labelled as not measured; a mark at each bar's ideal, a line at one rank's speed."""
    measured = [r for r in rows if r["world_size"] > 1 and r["speedup"] is not None]
    x = [tr("{n} ranks here<br>(measured)", n=r["world_size"]) for r in measured]
    planned = tr("{n}× {gpu}, {link}<br>(planner, not measured)",
                 n=expected["world_size"], gpu=expected["gpu"], link=expected["link_name"])
    fig = go.Figure()
    fig.add_bar(x=x, y=[r["speedup"] for r in measured], name=tr("measured here"),
                marker_color=SERIES[0], text=[f"{r['speedup']:.2f}×" for r in measured],
                textposition="inside", insidetextanchor="end")
    fig.add_bar(x=[planned], y=[expected["speedup"]],
                name=tr("expected, planner — not measured"),
                marker=dict(color=COLOURS["not measured"], pattern=dict(shape="/")),
                text=[f"{expected['speedup']:.2f}×"], textposition="inside",
                insidetextanchor="end")
    fig.add_scatter(x=x + [planned], y=[r["world_size"] for r in measured]
                    + [expected["world_size"]], mode="markers", name=tr("ideal (N ranks = N×)"),
                    marker=dict(symbol="line-ew", size=46, color="#24292f",
                                line=dict(width=2, color="#24292f")))
    fig.add_scatter(x=x + [planned], y=[1] * (len(x) + 1), mode="lines", name=tr("one rank (1×)"),
                    line=dict(dash="dot", color="#57606a"))
    top = max([expected["world_size"], expected["speedup"]]
              + [max(r["world_size"], r["speedup"]) for r in measured])
    fig.update_layout(title=dict(text=tr("Speedup over one rank, the same model and global batch")
                                 + "<br><sup>" + tr("measured here, beside what the planner "
                                                    "expects on GPUs") + "</sup>"),
                      yaxis=dict(title=tr("speedup over one rank"), range=[0, top * 1.2]),
                      barmode="overlay", template=TEMPLATE, height=380,
                      margin=dict(l=60, r=20, t=70, b=50), legend=dict(orientation="h", y=-0.15))
    return fig
