"""Lesson 10's picture of ring attention's steps, drawn from the code that runs them: the block
each rank holds at each step (rank r holds rank r−s's at step s, as ``RingAttention`` builds its
tiles), the query-key pairs ``ring_forward`` computes on it and, in brackets, those causal
masking leaves visible (``ring_step_work``, ``counted="computed"`` and ``"visible"``)."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...parallel.context_parallel.split import ring_step_work
from ...ui.style import TEMPLATE
from .verdicts import split_label


def ring_schematic(seq_len: int = 16, cp: int = 4) -> go.Figure:
    """Two panels, the contiguous and the zig-zag split of ``seq_len`` positions over ``cp``
    ranks: one cell per rank and ring step, naming the key/value block the rank holds and the
    query-key pairs ``ring_forward`` computes on it (the rectangle of ``visible_tile``: queries
    that see some key × keys some query sees), with the pairs causal masking leaves visible in
    brackets (white: nothing computed); each panel's title sums the steps' busiest ranks against
    all the pairs computed."""
    splits = ("contiguous", "zigzag")
    work = {s: ring_step_work(seq_len, cp, s, counted="computed").tolist() for s in splits}
    seen = {s: ring_step_work(seq_len, cp, s, counted="visible").tolist() for s in splits}
    top = max(max(max(row) for row in w) for w in work.values())
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08, subplot_titles=[
        split_label(s) + "<br><sup>" +
        tr("busiest rank, summed over steps: {longest}; all ranks: {total}",
           longest=sum(max(row) for row in work[s]), total=sum(sum(row) for row in work[s]))
        + "</sup>" for s in splits])
    for col, split in enumerate(splits, start=1):
        z = [[work[split][step][r] for step in range(cp)] for r in range(cp)]
        text = [[tr("KV of rank {src}", src=(r - step) % cp)
                 + f"<br>{z[r][step]} ({seen[split][step][r]})" for step in range(cp)]
                for r in range(cp)]
        fig.add_heatmap(z=z, x=[tr("step {step}", step=s) for s in range(cp)],
                        y=[tr("rank {rank}", rank=r) for r in range(cp)], text=text,
                        texttemplate="%{text}", textfont=dict(size=11),
                        hovertemplate="%{text}<extra></extra>",
                        colorscale="Blues", zmin=0, zmax=top, showscale=False, xgap=2, ygap=2,
                        row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=tr("Ring attention on {cp} ranks, {T} positions", cp=cp, T=seq_len)
                      + "<br><sup>" + tr("the block each rank holds at each step: query-key pairs "
                                         "computed (visible)") + "</sup>",
                      height=150 + 55 * cp, template=TEMPLATE, margin=dict(l=70, r=20, t=110, b=40))
    return fig
