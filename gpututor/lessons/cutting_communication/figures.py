"""Lesson 13's figures, drawn from the lever runs' measures (``levers.run_levers``): the
trade-off (bytes each rank sent per token against held-out loss, and against time per token on
the emulated link) and the timelines of the overlap runs, on one time scale."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...ui.step_timeline import step_timeline
from ...ui.style import LAYOUT, colours_for

SYMBOLS = ("circle", "diamond", "square")   # with the palette's ten colours: 30 runs told apart


def trade_off_figure(results: dict) -> go.Figure:
    """Left: held-out loss after the same tokens; right: milliseconds per 1,000 tokens on the
    emulated link; both against the bytes each rank sent per token (log scale). A run whose
    bytes were not measured is named in the title, not drawn at 0."""
    names = list(results)
    colours = colours_for(names)
    drawn = [n for n in names if results[n]["sent_per_token"] is not None]
    unmeasured = [n for n in names if n not in drawn]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        tr("held-out loss after the same tokens"),
        tr("milliseconds per 1,000 tokens on the emulated link")))
    for i, name in enumerate(drawn):
        r = results[name]
        for col, key in ((1, "held_out_loss"), (2, "ms_per_k_tokens")):
            fig.add_scatter(x=[r["sent_per_token"]], y=[r[key]], mode="markers",
                            name=tr(name), legendgroup=name, showlegend=col == 1,
                            marker=dict(size=11, color=colours[name],
                                        symbol=SYMBOLS[(i // 10) % len(SYMBOLS)]),
                            hovertemplate=tr(name) + "<br>%{x:,.1f} B/token<br>%{y:.3f}"
                                          "<extra></extra>", row=1, col=col)
    title = tr("Each lever: bytes sent per token against loss and time (one run each)")
    if unmeasured:
        title += "<br><sub>" + tr("bytes not measured, not drawn: {names}",
                                   names=", ".join(tr(n) for n in unmeasured)) + "</sub>"
    fig.update_layout(**{**LAYOUT, "height": 460}, title=title)
    fig.update_xaxes(type="log", title_text=tr("bytes each rank sent per token (log)"))
    fig.update_yaxes(title_text=tr("loss"), row=1, col=1)
    fig.update_yaxes(title_text=tr("ms per 1,000 tokens"), row=1, col=2)
    return fig


def overlap_timelines(on: dict, off: dict) -> tuple[go.Figure, go.Figure]:
    """The two overlap runs' last two steps, each rank's compute and collectives, drawn on the
    same milliseconds axis (``ui.step_timeline``)."""
    figures = (step_timeline(on["records"], title=tr("With overlap: buckets sent during "
                                                     "backward")),
               step_timeline(off["records"], title=tr("Without overlap: every bucket after "
                                                      "backward")))
    longest = max(max(b + w for t in f.data for b, w in zip(t.base, t.x)) for f in figures)
    for f in figures:
        f.update_xaxes(range=[0, longest * 1.02])
    return figures
