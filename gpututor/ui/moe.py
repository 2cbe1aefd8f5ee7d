"""Figures of lesson 11: how a mixture of experts spreads its tokens, drawn while a run trains."""
from __future__ import annotations

import time

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import tr


def imbalance(kept: list[int], dropped: list[int]) -> float:
    """The busiest expert's routed slots over the mean (1 = perfectly balanced)."""
    routed = [k + d for k, d in zip(kept, dropped)]
    return max(routed) / (sum(routed) / len(routed))


def expert_load_figure(records: list[dict], layer: int = 0, fig=None) -> go.Figure:
    """Left: slots kept and dropped per expert of ``layer`` at the latest step; right, per step:
    the busiest expert's load over the mean, and the MB rank 0 sent (expert parallel's
    all-to-alls; 0 on one rank). ``records``: rank 0's, in step order."""
    last = records[-1]
    kept, dropped = last["expert_tokens"][layer], last["expert_dropped"][layer]
    experts = [tr("expert {expert}", expert=e) for e in range(len(kept))]
    steps = [r["step"] for r in records]
    ratios = [imbalance(r["expert_tokens"][layer], r["expert_dropped"][layer]) for r in records]
    sent = [None if r.get("comm_bytes") is None else r["comm_bytes"] / 1e6 for r in records]
    title = tr("Layer {layer}, step {step}: {dropped} of {slots} slots dropped, busiest expert "
               "x{ratio:.2f} the mean", layer=layer, step=last["step"], dropped=sum(dropped),
               slots=sum(kept) + sum(dropped), ratio=ratios[-1])
    if fig is None or not fig.data:
        fig = fig if fig is not None else go.FigureWidget()
        grid = make_subplots(rows=1, cols=2, subplot_titles=(tr("slots per expert (latest step)"),
                                                             tr("per step")),
                             specs=[[{}, {"secondary_y": True}]])
        fig.update_layout(grid.layout)
        fig.add_bar(x=experts, y=kept, name=tr("kept"), xaxis="x", yaxis="y")
        fig.add_bar(x=experts, y=dropped, name=tr("dropped (over capacity)"), xaxis="x", yaxis="y")
        fig.add_scatter(x=steps, y=ratios, name=tr("busiest / mean"), mode="lines+markers",
                        xaxis="x2", yaxis="y2")
        fig.add_scatter(x=steps, y=sent, name=tr("MB sent by rank 0"), mode="lines+markers",
                        xaxis="x2", yaxis="y3")
        fig.update_layout(barmode="stack", height=380, template="plotly_white",
                          xaxis2_title=tr("step"), yaxis2_title=tr("busiest / mean"),
                          yaxis3=dict(title=tr("MB sent"), overlaying="y2", side="right",
                                      anchor="x2"))
    with fig.batch_update():
        fig.data[0].y, fig.data[1].y = kept, dropped
        fig.data[2].x, fig.data[2].y = steps, ratios
        fig.data[3].x, fig.data[3].y = steps, sent
        fig.layout.title = title
    return fig


def live_expert_load(run, layer: int = 0, every_s: float = 0.3) -> dict:
    """Show :func:`expert_load_figure` of rank 0, redrawn while ``run`` trains; return the
    run's summary when it ends (the figure ends on the last step)."""
    from IPython.display import display

    fig, mine, last = go.FigureWidget(), [], 0.0
    display(fig)
    for record in run:
        if record.get("rank") == 0 and record.get("expert_tokens") is not None:
            mine.append(record)
            if time.monotonic() - last > every_s:
                expert_load_figure(mine, layer, fig)
                last = time.monotonic()
    summary = run.wait()
    if mine:
        expert_load_figure(mine, layer, fig)
    return summary
