"""Lesson 01c's compile figure: the speedup ``torch.compile`` gave this run, beside the mean
speedups PyTorch published for an A100, labelled as not measured here."""
from __future__ import annotations

import plotly.graph_objects as go

from ...i18n import tr
from ...ui.style import COLOURS, SERIES, TEMPLATE
from .verdicts import PUBLISHED_COMPILE_A100


def compile_figure(comp: dict) -> go.Figure:
    """Eager time over compiled time (×1: no gain): this run's median on this machine's CPU in
    fp32, with the range of its interleaved pairs (``compile_costs``), and the A100 means over
    163 models in float32 and with AMP from PyTorch 2.0's announcement."""
    low, high = comp["speedup_range"]
    fig = go.Figure()
    fig.add_bar(x=[tr("this machine's CPU, fp32<br>measured here")], y=[comp["speedup"]],
                name=tr("measured here"), marker_color=SERIES[0],
                error_y=dict(type="data", symmetric=False, array=[high - comp["speedup"]],
                             arrayminus=[comp["speedup"] - low]),
                text=[f"×{comp['speedup']:.2f}"], textposition="inside", insidetextanchor="start")
    published = PUBLISHED_COMPILE_A100
    for precision, label in (("float32", tr("A100, float32<br>published, not measured here")),
                             ("amp", tr("A100, AMP<br>published, not measured here"))):
        fig.add_bar(x=[label], y=[published[precision]], name=tr("published (A100), not measured here"),
                    legendgroup="published", showlegend=precision == "float32",
                    marker_color=COLOURS["not measured"], marker_pattern_shape="/",
                    text=[f"×{published[precision]:.2f}"], textposition="outside", cliponaxis=False)
    fig.add_hline(y=1, line_dash="dot")   # ×1: compiled as fast as eager
    top = max(high, published["amp"], 1.0)
    fig.update_yaxes(range=[0, top * 1.2], title_text=tr("eager time / compiled time (1: no gain)"))
    fig.update_layout(title=tr("torch.compile's speedup: this run, and PyTorch's mean over {n} "
                               "models on an A100", n=published["models"]),
                      height=360, template=TEMPLATE)
    return fig
