"""Lesson 06's figure of speed by format: what this machine measured beside what a named GPU's
catalogue peaks lead one to expect there (labelled as not measured)."""
from __future__ import annotations

import math
import plotly.graph_objects as go

from ...i18n import tr
from ...ui.style import LAYOUT, colours_for
from .verdicts import catalogue_ratios, step_ratio


def speed_figure(rates: dict[str, float], fp32: dict, bf16: dict, gpu: str = "H100-80GB",
                 title: str = "bf16 and fp16 against fp32: measured here, and expected on a GPU"
                 ) -> go.Figure:
    """Speed over fp32's, one bar per format and group: a matmul measured on this CPU (``rates``,
    from ``matmul_flops_by_dtype``), a training step measured on the runs' device (the launched
    runs' summaries ``fp32``, ``bf16``: tokens/s; no bar where not measured; the lesson launches
    no fp16 run), and ``gpu``'s dense catalogue peaks (hatched: expected, not measured). Log axis,
    ticked at the values drawn and at 1."""
    expected = catalogue_ratios(gpu)
    where = tr("this GPU") if bf16["device"].startswith("cuda") else tr("this CPU")
    groups = [tr("one matmul<br>{where}, measured", where=tr("this CPU")),
              tr("training step<br>{where}, measured (bf16 only)", where=where),
              tr("expected on {gpu}<br>(catalogue peaks), not measured", gpu=gpu)]
    values = {"bf16": [rates["bf16"] / rates["fp32"], step_ratio(fp32, bf16), expected["bf16"]],
              "fp16": [rates["fp16"] / rates["fp32"] if "fp16" in rates else None, None,
                       expected["fp16"]]}
    colours = colours_for(values)
    fig = go.Figure()
    for name, ys in values.items():
        # each bar grows from fp32's 1x: up where the format is faster, down where slower
        fig.add_bar(x=groups, y=[None if y is None else y - 1 for y in ys], base=1, name=name,
                    marker_color=colours[name], marker_pattern_shape=["", "", "/"],
                    customdata=ys, hovertemplate="%{x}: %{customdata:.3g}×",
                    text=["" if y is None else f"{y:.3g}×" for y in ys], textposition="outside")
    shown = [y for ys in values.values() for y in ys if y] + [1.0]
    ticks = ticks_at(shown)
    fig.add_hline(y=1, line_color="gray", line_width=1)
    low, high = min(shown), max(shown)
    fig.update_layout(title=tr(title), barmode="group", **{**LAYOUT, "height": 420})
    fig.update_layout(yaxis=dict(title=tr("speed over fp32 (log scale)"), type="log",
                                 tickvals=ticks, ticktext=[tr("{x}× = fp32", x=1) if v == 1
                                                           else f"{v:g}×" for v in ticks],
                                 range=[math.log10(low / 2.5), math.log10(high * 2.5)]),
                      legend_title_text=tr("format"))
    return fig


def ticks_at(values, apart: float = 1.25) -> list[float]:
    """The values to tick a log axis at: each value drawn, to 3 significant digits, leaving out one
    within a factor ``apart`` of a tick already kept (their labels would overlap); 1 always."""
    kept = [1.0]
    for v in sorted({float(f"{v:.3g}") for v in values if v}, key=lambda v: abs(math.log(v))):
        if all(max(v, k) / min(v, k) >= apart for k in kept):
            kept.append(v)
    return sorted(kept)
