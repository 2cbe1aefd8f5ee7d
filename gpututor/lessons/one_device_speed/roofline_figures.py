"""Lesson 01c's roofline chart: this machine's measured roofs, datasheet roofs of GPUs for
comparison, and the model's operators where they landed here (see
:mod:`gpututor.measure.roofline` for the model and how each number is measured)."""
from __future__ import annotations

import plotly.graph_objects as go

from ...i18n import tr
from ...measure.roofline import attainable, bound, ridge
from ...ui.style import TEMPLATE

GFLOP = 1e9


def roofline_figure(rows: list[dict], peak: float, bandwidth: float, roofs=()) -> go.Figure:
    """Log-log roofline: FLOP/s against intensity (FLOP/byte).

    ``rows`` are :func:`~gpututor.measure.roofline.operator_costs` rows, measured here, and
    ``peak`` and ``bandwidth`` this machine's measured roofs; ``roofs`` are
    :func:`~gpututor.measure.roofline.catalog_roofs` entries, drawn dashed and never with
    points: nothing was measured on them.
    """
    here = ridge(peak, bandwidth)
    intensities = [r["intensity"] for r in rows] + [here] + [roof["ridge"] for roof in roofs]
    x_range = (min(intensities) / 4, max(intensities) * 4)

    fig = go.Figure()
    _add_roof(fig, peak, bandwidth, x_range, tr("this machine, measured"), dict(width=3))
    for roof in roofs:
        _add_roof(fig, roof["peak"], roof["bandwidth"], x_range,
                  tr("{gpu}, catalogue (not measured)", gpu=roof["name"]),
                  dict(dash="dash", width=2),
                  hover=tr("{precision} peak; {source}", precision=roof.get("precision", ""),
                           source=roof["source"]))
    if rows:
        fig.add_scatter(
            x=[r["intensity"] for r in rows], y=[r["flops_per_s"] for r in rows],
            mode="markers", name=tr("operators, measured here"), marker=dict(size=10),
            customdata=[[tr(r["op"]), r["flops_per_s"] / GFLOP, r["intensity"],
                         tr(bound(r["intensity"], peak, bandwidth))] for r in rows],
            # a plotly template, not a str.format one: tr() is called without values
            hovertemplate=tr("<b>%{customdata[0]}</b><br>achieved %{customdata[1]:.2f} GFLOP/s"
                             "<br>intensity %{customdata[2]:.3g} FLOP/byte"
                             "<br>%{customdata[3]} here<extra></extra>"))
    others = "; ".join(f"{roof['name']} {roof['ridge']:.3g}" for roof in roofs)
    fig.update_layout(
        title=tr("Roofline: ridge at {ridge:.3g} FLOP/byte here", ridge=here)
              + (tr(" (catalogue: {others})", others=others) if others else ""),
        xaxis=dict(type="log", title=tr("arithmetic intensity (FLOP/byte)")),
        yaxis=dict(type="log", title="FLOP/s"),
        template=TEMPLATE, height=460, legend=dict(x=0.01, y=0.99))
    return fig


def _add_roof(fig: go.Figure, peak: float, bandwidth: float, x_range: tuple, name: str,
              line: dict, hover: str = "") -> None:
    """The roof min(peak, bandwidth × I) as three points: both ends and the ridge (which
    ``x_range`` holds)."""
    x = [x_range[0], ridge(peak, bandwidth), x_range[1]]
    fig.add_scatter(x=x, y=[attainable(i, peak, bandwidth) for i in x], mode="lines",
                    name=name, line=line,
                    hovertemplate=(f"{name}<br>%{{x:.3g}} FLOP/byte → %{{y:.3s}}FLOP/s"
                                   + (f"<br>{hover}" if hover else "") + "<extra></extra>"))
