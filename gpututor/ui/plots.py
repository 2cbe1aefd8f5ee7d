"""Static plotly figures for the lessons. Each builder plots only the measured values it is given.

They take run summaries (what ``run.wait()`` and :func:`gpututor.lessons.common.sweep.sweep` return) or measured
numbers, and return a ``plotly.graph_objects.Figure`` (static: renders in every front end).
"""
from __future__ import annotations

import math
from typing import Iterable

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..formulas import bus_factor
from ..i18n import tr
from ..precision.formats import smallest_subnormal
from .style import COLOURS, LAYOUT
from ..formulas import MB

CATEGORY_LABELS = {"params": "parameters", "grads": "gradients",
                   "optimizer": "optimizer state", "activations": "activations"}


def phase_times(phase_s: dict[str, float], title: str = "Time per phase of one step (median)"
                ) -> go.Figure:
    """Bars of milliseconds per phase, e.g. ``StepAnatomy.phase_s``."""
    names = list(phase_s)
    ms = [phase_s[n] * 1e3 for n in names]
    fig = go.Figure(go.Bar(x=[tr(n) for n in names], y=ms, text=[f"{v:.1f} ms" for v in ms],
                           textposition="outside"))
    fig.update_layout(title=tr(title), yaxis_title=tr("milliseconds"), **LAYOUT)
    return fig


def memory_by_category(summaries: dict[str, dict], rank: int = 0,
                       title: str = "Measured memory by category") -> go.Figure:
    """Stacked bars: one per labelled run, bytes of each category (from ``mem_by_category``)."""
    labels = list(summaries)
    fig = go.Figure()
    for category, name in CATEGORY_LABELS.items():
        values = [_category(summaries[label], category, rank) for label in labels]
        fig.add_bar(x=[tr(label) for label in labels], y=[(v or 0) / MB for v in values], name=tr(name),
                    marker_color=COLOURS[category])
    fig.update_layout(barmode="stack", title=tr(title), yaxis_title="MB", **LAYOUT)
    return fig


def throughput_and_memory(summaries: list[dict], rank: int = 0, log_x: bool = False,
                          title: str = "Throughput and memory against the swept value"
                          ) -> go.Figure:
    """Tokens/s (left) and peak and activation memory (right) for each run of a sweep."""
    field = summaries[0]["sweep_field"]
    x = [s["sweep_value"] for s in summaries]
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("throughput"), tr("memory")))
    fig.add_scatter(x=x, y=[s["tokens_per_s"] for s in summaries], mode="lines+markers",
                    name="tokens/s", row=1, col=1)
    fig.add_scatter(x=x, y=[(s["peak_mem_bytes"][rank] or 0) / MB for s in summaries],
                    mode="lines+markers", name=tr("peak memory"), row=1, col=2)
    fig.add_scatter(x=x, y=[(_category(s, "activations", rank) or 0) / MB for s in summaries],
                    mode="lines+markers", name=tr("activations"), row=1, col=2)
    fig.update_xaxes(title_text=field, type="log" if log_x else None,
                     **(dict(tickvals=x, ticktext=[str(v) for v in x]) if log_x else {}))
    fig.update_yaxes(title_text="tokens/s", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="MB", rangemode="tozero", row=1, col=2)
    fig.update_layout(title=tr(title), **LAYOUT)
    return fig


def loss_curves(curves: dict[str, list[float]], title: str = "Training loss per step"
                ) -> go.Figure:
    """One line per labelled run: the global loss after each optimizer step."""
    fig = go.Figure()
    for i, (label, losses) in enumerate(curves.items()):
        fig.add_scatter(x=list(range(len(losses))), y=losses, name=tr(label), mode="lines+markers",
                        line=dict(dash="dash" if i else "solid"), marker=dict(size=9 - 4 * (i > 0)))
    fig.update_layout(title=tr(title), xaxis_title=tr("step"), yaxis_title=tr("loss"), **LAYOUT)
    return fig


def checkpointing_tradeoff(summaries: dict[str, dict], rank: int = 0,
                           title: str = "What activation checkpointing trades") -> go.Figure:
    """Side by side for each labelled run: activation memory and median step time."""
    labels = list(summaries)
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("activation memory (MB)"),
                                                        tr("step time (ms)")))
    act = [(_category(summaries[k], "activations", rank) or 0) / MB for k in labels]
    ms = [summaries[k]["step_time_s"] * 1e3 for k in labels]
    fig.add_bar(x=[tr(label) for label in labels], y=act, text=[f"{v:.1f}" for v in act], showlegend=False, row=1, col=1)
    fig.add_bar(x=[tr(label) for label in labels], y=ms, text=[f"{v:.0f}" for v in ms], showlegend=False, row=1, col=2)
    fig.update_layout(title=tr(title), **LAYOUT)
    return fig


def _category(summary: dict, category: str, rank: int):
    return summary["mem_by_category"][category][rank]


def step_breakdown(summaries: dict[str, dict], title: str = "Median step: compute and "
                   "waiting for communication") -> go.Figure:
    """Stacked bars per labelled run: compute time and exposed communication (ms, median)."""
    labels = list(summaries)
    ms = lambda v: None if v is None else v * 1e3
    unmetered = [k for k in labels if summaries[k]["comm_s"] is None]
    shown = [tr(k) for k in labels]   # a lesson's run names, in its language where it has them
    fig = go.Figure()
    fig.add_bar(x=shown, y=[ms(summaries[k]["compute_s"]) for k in labels], name=tr("compute"),
                marker_color=COLOURS["compute"])
    fig.add_bar(x=shown, y=[ms(summaries[k]["comm_s"]) for k in labels],
                name=tr("waiting for communication"), marker_color=COLOURS["communication"])
    if unmetered:   # their whole step, in grey: compute and communication not told apart
        fig.add_bar(x=[tr(k) for k in unmetered], y=[ms(summaries[k]["step_time_s"]) for k in unmetered],
                    name=tr("whole step (communication not measured)"),
                    marker_color=COLOURS["not measured"])
    fig.update_layout(barmode="stack", title=tr(title), yaxis_title=tr("milliseconds per step"),
                      **LAYOUT)
    return fig


def collective_times(rows: list[dict], world_size: int,
                     title: str = "Collectives measured here") -> go.Figure:
    """Time vs message size per collective (log-log), with the ring lower bound for all-reduce
    at the best bus bandwidth measured: ``t >= 2(n-1)/n * S / B``."""
    fig = go.Figure()
    ok = [r for r in rows if "time_s" in r]
    for op in dict.fromkeys(r["op"] for r in ok):
        mine = [r for r in ok if r["op"] == op]
        fig.add_scatter(x=[r["bytes"] for r in mine], y=[r["time_s"] * 1e6 for r in mine],
                        mode="lines+markers", name=op)
    allreduce = [r for r in ok if r["op"] == "all_reduce"]
    if allreduce:
        best = max(r["busbw"] for r in allreduce)
        sizes = [r["bytes"] for r in allreduce]
        factor = bus_factor("all_reduce", world_size)
        fig.add_scatter(x=sizes, y=[factor * s / best * 1e6 for s in sizes], mode="lines",
                        line=dict(dash="dash", color="gray"),
                        name=tr("ring lower bound at {bandwidth:.2f} GB/s bus bandwidth",
                                bandwidth=best / 1e9))
    fig.update_layout(title=tr(title), xaxis=dict(title=tr("message size (bytes)"), type="log"),
                      yaxis=dict(title=tr("time (µs)"), type="log"), **LAYOUT)
    return fig


def speedups(summaries: dict[str, dict], baseline: dict, title: str) -> go.Figure:
    """Bars of tokens/s relative to ``baseline`` for each labelled run, with the ideal marked."""
    labels = list(summaries)
    values = [summaries[k]["tokens_per_s"] / baseline["tokens_per_s"] for k in labels]
    fig = go.Figure(go.Bar(x=[tr(k) for k in labels], y=values, text=[f"{v:.2f}×" for v in values],
                           textposition="outside"))
    ideal = max(s["world_size"] for s in summaries.values())
    fig.add_hline(y=ideal, line_dash="dash", line_color="gray",
                  annotation_text=tr("ideal {ideal}×", ideal=ideal))
    fig.update_layout(title=tr(title), yaxis=dict(title=tr("speedup over one rank"),
                                                  rangemode="tozero"), **LAYOUT)
    return fig


def gradient_histogram(gradients: Iterable[torch.Tensor], title: str =
                       "Gradient magnitudes of one fp32 backward, and where fp16 loses them"):
    """Histogram of log2|g| over all nonzero gradient entries, with fp16's limits marked."""
    values = torch.cat([g.detach().flatten().double().abs() for g in gradients])
    exponents = torch.log2(values[values > 0]).float().numpy()
    fig = go.Figure(go.Histogram(x=exponents, nbinsx=60, name=tr("gradient entries")))
    fp16 = torch.finfo(torch.float16)
    marks = [(math.log2(smallest_subnormal(torch.float16)), "fp16: smallest > 0"),
             (math.log2(fp16.smallest_normal), "fp16 subnormal below"),
             (math.log2(fp16.max), "fp16 max")]
    for x, text in marks:
        fig.add_vline(x=x, line_dash="dash", line_color="#cf222e",
                      annotation_text=tr(text), annotation_position="top")
    fig.update_layout(title=tr(title), xaxis_title=tr("log2 |gradient|"), yaxis_title=tr("entries"),
                      **LAYOUT)
    return fig


def loss_scale_replay(rows: list[dict], title: str =
                      "Loss scale per step: the from-scratch scaler and torch.amp.GradScaler"):
    """The scale each scaler used at each step of ``precision.replay_scalers``'s rows (log axis),
    and the steps each skipped: where the two agree, GradScaler's open marks ring ours."""
    steps = list(range(len(rows)))
    fig = go.Figure()
    fig.add_scatter(x=steps, y=[r["scale"] for r in rows], mode="lines+markers", line_shape="hv",
                    name=tr("ours"), marker=dict(size=8))
    fig.add_scatter(x=steps, y=[r["grad_scaler_scale"] for r in rows], mode="markers",
                    name="GradScaler", marker=dict(size=16, symbol="circle-open", line_width=2))
    for key, label, symbol, size in (("skipped", "ours: step skipped", "x", 10),
                                     ("grad_scaler_skipped", "GradScaler: step skipped",
                                      "square-open", 18)):
        skipped = [s for s in steps if rows[s][key]]
        scale = "scale" if key == "skipped" else "grad_scaler_scale"
        fig.add_scatter(x=skipped, y=[rows[s][scale] for s in skipped], mode="markers",
                        name=tr(label), marker=dict(size=size, symbol=symbol, color="#cf222e"))
    fig.update_layout(title=tr(title),
                      yaxis=dict(title=tr("loss scale"), type="log", dtick=math.log10(2),
                                 tickformat="d"),   # a tick at every power of 2
                      xaxis=dict(title=tr("step (and its gradient)"), tickvals=steps,
                                 ticktext=[f"{s}<br>{r['gradient']}" for s, r in zip(steps, rows)]),
                      **LAYOUT)
    return fig
