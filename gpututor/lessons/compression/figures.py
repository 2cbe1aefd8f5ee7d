"""Lesson 07's figures: what each compression variant buys and costs, and loss vs sparsity.

The rows come from :func:`gpututor.compression.measure.measure_variants` (all measured).
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...ui.style import SERIES, TEMPLATE
from .runs import variant_label


def tradeoff_figure(rows: list[dict], title: str = "What each compression buys, and costs "
                    "(measured in one run)") -> go.Figure:
    """Three panels sharing the variants: size (MB) and latency (ms) as bars, validation loss as
    dots beside a dashed line at the baseline's (bars of a loss would start at an arbitrary
    value). Each label adds the variant against the first row (the baseline): size and latency
    as a ratio (``0.31x``), loss as a difference (``+0.012``), written on the side of the dot
    that has room."""
    names = [r["variant"] for r in rows][::-1]   # first variant on top
    by_name = {r["variant"]: r for r in rows}
    base = rows[0]
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=(tr("size on disk (MB)"), tr("CPU latency per batch (ms)"),
                                        tr("validation loss")))
    against = {"bytes": lambda r: f"{r['bytes'] / base['bytes']:.2f}x",
               "latency_s": lambda r: f"{r['latency_s'] / base['latency_s']:.2f}x",
               "loss": lambda r: f"{r['loss'] - base['loss']:+.3f}"}
    columns = [("bytes", 1e-6, "{:.2f}"), ("latency_s", 1e3, "{:.1f}"), ("loss", 1, "{:.3f}")]
    labels = [variant_label(n) for n in names]
    for col, (key, unit, fmt) in enumerate(columns, start=1):
        values = [by_name[n][key] * unit for n in names]
        text = [f"{fmt.format(v)} ({against[key](by_name[n])})" for v, n in zip(values, names)]
        colour = SERIES[col - 1]
        if key != "loss":
            fig.add_bar(x=values, y=labels, orientation="h", text=text, textposition="auto",
                        marker_color=colour, showlegend=False, row=1, col=col)
            continue
        low, high = min(values), max(values)
        pad = max(high - low, 0.02) * 0.08
        middle = (low + high) / 2
        fig.add_scatter(x=values, y=labels, mode="markers+text", text=text, showlegend=False,
                        textposition=["middle right" if v <= middle else "middle left"
                                      for v in values],
                        marker=dict(color=colour, size=9), row=1, col=col)
        fig.add_vline(x=base["loss"], line_dash="dot", line_color=SERIES[9], layer="below", row=1,
                      col=col)
        fig.update_xaxes(range=[low - pad, high + pad], row=1, col=col)
    fig.update_layout(title=tr(title), template=TEMPLATE, height=120 + 32 * len(rows),
                      margin=dict(l=60, r=20, t=80, b=40))
    return fig


def sparsity_figure(sparsities: list[float], curves: dict[str, list[float]],
                    title: str = "Validation loss against the fraction of weights pruned"
                    ) -> go.Figure:
    """One line per labelled series of losses, measured at each sparsity."""
    fig = go.Figure()
    for label, losses in curves.items():
        fig.add_scatter(x=[s * 100 for s in sparsities], y=losses, mode="lines+markers",
                        name=tr(label))
    fig.update_layout(title=tr(title), xaxis_title=tr("weights pruned (%)"), yaxis_title=tr("loss"),
                      template=TEMPLATE, height=360, margin=dict(l=60, r=20, t=80, b=50))
    return fig


def sparse_timing_figure(rows: list[dict], title: str = "One Linear's matmul, dense kernel and "
                         "sparse CSR, against the weights pruned (measured here)") -> go.Figure:
    """Two lines, microseconds against the share of zeros: ``rows`` of ``{"sparsity", "dense",
    "sparse_csr"}`` (seconds, from :func:`gpututor.compression.prune.matmul_seconds`)."""
    fig = go.Figure()
    x = [r["sparsity"] * 100 for r in rows]
    for key, label in (("dense", "dense kernel"), ("sparse_csr", "sparse CSR")):
        fig.add_scatter(x=x, y=[r[key] * 1e6 for r in rows], mode="lines+markers", name=tr(label))
    fig.update_layout(title=tr(title), xaxis_title=tr("weights pruned (%)"),
                      yaxis_title=tr("time per matmul (µs)"), template=TEMPLATE, height=360,
                      margin=dict(l=60, r=20, t=80, b=50))
    return fig
