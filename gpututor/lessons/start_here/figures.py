"""Lesson 00's table of common claims, each with what the learner's own run showed."""
from __future__ import annotations

import html

from ...i18n import tr


def claims_html(rows: list[dict]) -> str:
    """An HTML table of ``gpututor.lessons.common.results.claims()``-shaped rows, in the notebook's
    language; a claim whose lesson has not run yet says "not measured yet"."""
    head = "".join(f"<th style='text-align:left'>{html.escape(tr(h))}</th>"
                   for h in ("claim", "measured in lesson", "what your run showed"))
    body = []
    for r in rows:
        if r["values"] is None:
            showed = f"<i>{html.escape(tr('not measured yet: run lesson {lesson}', lesson=r['lesson']))}</i>"
        else:
            showed = html.escape(tr(r["template"], **r["values"])) + \
                f" <small>({html.escape(r['when'])})</small>"
        body.append(f"<tr><td>{html.escape(tr(r['claim']))}</td><td>{html.escape(r['lesson'])}</td>"
                    f"<td>{showed}</td></tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def show_claims(rows: list[dict]):
    """Display :func:`claims_html` in the notebook (and return the HTML object)."""
    from IPython.display import HTML
    return HTML(claims_html(rows))


def speedup_figure(bars: dict):
    """Lesson 00's speedups as one bar chart (``contention.speedups``): the ideal, two ranks that
    never talk, DDP without a view, the panels (both runs drawn live); a bar not measured is left out
    and the title names it; the dashed line is one rank."""
    import plotly.graph_objects as go

    from ...ui.style import COLOURS, LAYOUT, SERIES
    colours = {"ideal": COLOURS["not measured"], "independent pair": SERIES[2],
               "DDP, no live view": SERIES[0], "panels (both runs with live views)": SERIES[4]}
    missing = [tr(k) for k, v in bars.items() if v is None]
    bars = {k: v for k, v in bars.items() if v is not None}
    values = list(bars.values())
    fig = go.Figure(go.Bar(x=[tr(k) for k in bars], y=values, text=[f"{v:.2f}×" for v in values],
                           textposition="inside", insidetextanchor="end", marker_color=[colours[k] for k in bars],
                           showlegend=False))
    fig.add_hline(y=1, line_dash="dash", line_color="gray", annotation_text=tr("one rank = 1×"),
                  annotation_position="top left")
    title = tr("Speedup over one rank, measured in this notebook")
    if missing:
        title += "<br><sup>" + tr("not measured: {what}", what="; ".join(missing)) + "</sup>"
    fig.update_layout(title=title,
                      yaxis=dict(title=tr("× one rank's tokens/s"), rangemode="tozero",
                                 range=[0, max(values, default=1) * 1.2]), **LAYOUT)
    return fig
