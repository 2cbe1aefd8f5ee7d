"""Lesson 01b's attention figures: the three ways against the sequence length, each way drawn so
that none hides another, and their times at the longest sequence beside FlashAttention's
published A100 figure, labelled as not measured here."""
from __future__ import annotations

import plotly.graph_objects as go

from ...i18n import tr
from ...ui.style import COLOURS, TEMPLATE, colours_for
from ..common import one_device_figures
from .verdicts import FLASH_ATTENTION_A100, flash_attention_ratio

# SDPA and the tiled way keep the same bytes, so their lines coincide in the memory panel: the
# tiled line is drawn wider and solid with round markers, SDPA dashed with crosses on top of it
WAY_STYLE = {"naive": dict(line_width=2, marker_symbol="circle"),
             "tiled": dict(line_width=5, marker_symbol="circle", marker_size=10),
             "sdpa": dict(line_width=2, line_dash="dash", marker_symbol="x", marker_size=8)}


def attention_figure(rows: list[dict]) -> go.Figure:
    """``lessons.common``'s figure of the three ways against the sequence length (kept bytes and
    time, one colour per way), each way in its own line style and marker (:data:`WAY_STYLE`)."""
    fig = one_device_figures.attention_figure(rows)
    for way, style in WAY_STYLE.items():
        fig.update_traces(selector=dict(legendgroup=way), **style)
    fig.update_yaxes(dtick=1)   # log axes: a tick at each power of ten, no unlabelled 2s and 5s
    return fig


def attention_time_figure(rows: list[dict]) -> go.Figure:
    """At the longest sequence measured: the tiled way's and SDPA's time over ordinary
    attention's, measured here, beside FlashAttention's over standard attention's on an A100 at
    sequence 1024 as its paper published it (Figure 2; not measured here) [ref: dao2022-flops]."""
    longest = max(r["seq_len"] for r in rows)
    at = {r["way"]: r["seconds"] for r in rows if r["seq_len"] == longest}
    colours = colours_for(r["way"] for r in rows)   # the colours of attention_figure
    fig = go.Figure()
    for way in ("tiled", "sdpa"):
        ratio = at[way] / at["naive"]
        fig.add_bar(x=[tr("{way}<br>measured here, T = {T}", way=tr(way), T=longest)], y=[ratio],
                    name=tr(way), marker_color=colours[way], text=[f"{ratio:.2f}×"],
                    textposition="outside", cliponaxis=False)
    published = flash_attention_ratio()
    fig.add_bar(x=[tr("FlashAttention, A100, T = {T}<br>published, not measured here",
                        T=FLASH_ATTENTION_A100["seq_len"])],
                y=[published], name=tr("published (A100), not measured here"),
                marker_color=COLOURS["not measured"], marker_pattern_shape="/",
                text=[f"{published:.2f}×"], textposition="outside", cliponaxis=False)
    fig.add_hline(y=1, line_dash="dot", annotation_text=tr("ordinary attention"),
                  annotation_position="top left")
    top = max([at["tiled"] / at["naive"], at["sdpa"] / at["naive"], published, 1.0])
    fig.update_yaxes(range=[0, top * 1.25], title_text=tr("time / ordinary attention's time"))
    fig.update_layout(title=tr("Forward + backward time against ordinary attention's"),
                      height=360, template=TEMPLATE, showlegend=True)
    return fig
