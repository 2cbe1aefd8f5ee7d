"""Lesson 08's "Which network between the servers?" figure, from :func:`link_choice.link_choice`'s
rows (plotly lives here, apart from the numbers, which a rank may import)."""
from __future__ import annotations

import plotly.graph_objects as go

from ...catalog import GB
from ...i18n import tr
from .link_choice import MAX_SHARE


def link_choice_figure(choice: dict, max_share: float = MAX_SHARE) -> go.Figure:
    """For each lever a line: the share of the step data parallel leaves exposed, on each link
    (in order of bandwidth, slowest on the left, evenly spaced); the dashed line is
    ``max_share``."""
    fig = go.Figure()
    for lever, rows in choice.items():
        labels = [f"{r['link']} ({r['bandwidth'] / GB:g} GB/s)" for r in rows]
        fig.add_scatter(x=labels, y=[100 * r["exposed_share"] for r in rows],
                        mode="lines+markers", name=tr(lever))
    fig.add_hline(y=100 * max_share, line_dash="dash",
                  annotation_text=tr("{share:.0%} of the step", share=max_share))
    fig.update_layout(title=tr("Data parallel's exposed time per link, by lever (planner)"),
                      xaxis_title=tr("network link per GPU, in order of bandwidth (evenly spaced)"),
                      yaxis_title=tr("% of the step waiting on data parallel"),
                      yaxis_range=[0, 100])
    return fig
