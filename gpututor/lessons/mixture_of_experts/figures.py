"""Figures of lesson 11: how a mixture of experts spreads its tokens, drawn while a run trains."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...ui.follow import UPDATE_INTERVAL_S, Follower
from ...ui.live_figure import LiveFigure
from ...ui.style import TEMPLATE
from .load import imbalance


def expert_load_figure(records: list[dict], layer: int = 0, fig=None) -> go.Figure:
    """Left: slots kept and dropped per expert of ``layer`` at the latest step; then, per step,
    the busiest expert's load over the mean, and, for a run of more than one rank (or records that
    sent bytes), the MB rank 0 sent (expert parallel's all-to-alls; a one-rank run sends nothing,
    and gets no such panel).
    ``records``: rank 0's, in step order. ``fig``: a figure made here before, updated in place
    (the live view's)."""
    last = records[-1]
    kept, dropped = last["expert_tokens"][layer], last["expert_dropped"][layer]
    experts = [tr("expert {expert}", expert=e) for e in range(len(kept))]
    steps = [r["step"] for r in records]
    ratios = [imbalance(r["expert_tokens"][layer], r["expert_dropped"][layer]) for r in records]
    sends = last.get("world_size", 1) > 1 or any(r.get("comm_wire_bytes") for r in records)
    sent = [None if r.get("comm_wire_bytes") is None else r["comm_wire_bytes"] / 1e6
            for r in records]
    title = tr("Layer {layer}, step {step}: {dropped} of {slots} slots dropped, busiest expert "
               "x{ratio:.2f} the mean", layer=layer, step=last["step"], dropped=sum(dropped),
               slots=sum(kept) + sum(dropped), ratio=ratios[-1])
    if fig is None or not fig.data:
        fig = fig if fig is not None else go.Figure()
        titles = [tr("slots per expert (latest step)"), tr("busiest / mean")]
        grid = make_subplots(rows=1, cols=3 if sends else 2,
                             subplot_titles=titles + ([tr("MB sent by rank 0")] if sends else []))
        fig.layout = grid.layout   # assigned: update_layout(grid.layout) walks every property (seconds)
        fig.add_bar(x=experts, y=kept, name=tr("kept"), xaxis="x", yaxis="y")
        fig.add_bar(x=experts, y=dropped, name=tr("dropped (over capacity)"), xaxis="x", yaxis="y")
        fig.add_scatter(x=steps, y=ratios, name=tr("busiest / mean"), mode="lines+markers",
                        xaxis="x2", yaxis="y2")
        if sends:
            fig.add_scatter(x=steps, y=sent, name=tr("MB sent by rank 0"), mode="lines+markers",
                            xaxis="x3", yaxis="y3")
            fig.update_layout(xaxis3_title=tr("step"), yaxis3_title=tr("MB sent"))
        fig.update_layout(barmode="stack", height=360, template=TEMPLATE,
                          xaxis2_title=tr("step"))
    with fig.batch_update():
        fig.data[0].y, fig.data[1].y = kept, dropped
        fig.data[2].x, fig.data[2].y = steps, ratios
        if len(fig.data) > 3:
            fig.data[3].x, fig.data[3].y = steps, sent
        fig.layout.title = title
    return fig


def live_expert_load(run, layer: int = 0, every_s: float = UPDATE_INTERVAL_S) -> dict:
    """Show :func:`expert_load_figure` of rank 0, redrawn while ``run`` trains (its first step at
    once, then at most every ``every_s`` seconds: ``Follower.follow``); return the run's summary
    when it ends (the figure ends on the last step)."""
    from IPython.display import display

    fig, view, mine = go.Figure(), LiveFigure(), []
    display(view)

    def on_record(record):
        if record.get("rank") == 0 and record.get("expert_tokens") is not None:
            mine.append(record)

    def draw():
        if mine:
            view.show(expert_load_figure(mine, layer, fig))

    Follower.follow(run, draw, ready=lambda: bool(mine), on_record=on_record, interval=every_s)
    summary = run.wait()
    draw()
    return summary


def capacity_factor_figure(rows: list[dict],
                           title: str = "What the capacity factor trades, measured") -> go.Figure:
    """One bar per capacity factor in each panel: the share of routed slots dropped at the last
    step, the final loss, and tokens/s. ``rows``: dicts with ``capacity_factor``, ``dropped``
    (a fraction), ``final_loss`` and ``tokens_per_s`` (None: not measured, no bar)."""
    x = [str(r["capacity_factor"]) for r in rows]
    panels = [("slots dropped at the last step (%)", lambda r: 100 * r["dropped"], "{:.1f}"),
              ("final loss", lambda r: r["final_loss"], "{:.3f}"),
              ("tokens/s", lambda r: r["tokens_per_s"], "{:,.0f}")]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[tr(name) for name, _, _ in panels])
    for col, (_, value, fmt) in enumerate(panels, start=1):
        ys = [None if r.get(key) is None else value(r)
              for r, key in zip(rows, [("dropped", "final_loss", "tokens_per_s")[col - 1]] * len(rows))]
        fig.add_bar(x=x, y=ys, text=[tr("not measured") if y is None else fmt.format(y) for y in ys],
                    textposition="outside", showlegend=False, row=1, col=col)
        fig.update_xaxes(title_text=tr("capacity factor"), type="category", row=1, col=col)
    fig.update_layout(title=tr(title), template=TEMPLATE, height=360,
                      margin=dict(l=50, r=20, t=80, b=50))
    return fig
