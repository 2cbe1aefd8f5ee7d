"""Figures of lesson 12: what a checkpoint costs per layout (measured), losses of runs continued
from checkpoints, and GPU-hours lost per day against the checkpoint interval (a formula)."""
from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...plan.interruptions import job_mtbf_s, lost_gpu_hours_per_day, young_interval
from ...ui.style import TEMPLATE, colours_for
from ...formulas import DAY, HOUR, MB

# the interval axis's ticks, in hours, and their labels: units a reader plans in, not 2 5 10
INTERVAL_TICKS = ((60 / HOUR, "1 min"), (600 / HOUR, "10 min"), (1.0, "1 h"), (6.0, "6 h"),
                  (DAY / HOUR, "1 day"), (7 * DAY / HOUR, "1 week"))


def checkpoint_figure(runs: dict[str, dict],
                      title: str = "What a checkpoint cost, per layout (measured)") -> go.Figure:
    """``runs``: layout -> run summary with a ``checkpoint`` section. Left: MB each rank wrote;
    right: the whole save against the time training was blocked (median over saves). A value
    not measured (None) draws no bar: never a bar of 0."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        tr("MB written by each rank (one save)"), tr("seconds per save (slowest rank)")))
    world = max(len(s["checkpoint"]["bytes_per_rank"]) for s in runs.values())
    colours = colours_for([*range(world), "save", "blocked"])   # one colour per legend entry
    mb = lambda b: None if b is None else b / MB
    for rank in range(world):
        fig.add_bar(x=list(runs), y=[mb(s["checkpoint"]["bytes_per_rank"][rank])
                                     if rank < len(s["checkpoint"]["bytes_per_rank"]) else None
                                     for s in runs.values()],
                    name=tr("rank {rank}", rank=rank), marker_color=colours[rank], row=1, col=1)
    fig.add_bar(x=list(runs), y=[s["checkpoint"]["save_s"] for s in runs.values()],
                name=tr("the whole save"), marker_color=colours["save"], row=1, col=2)
    fig.add_bar(x=list(runs), y=[s["checkpoint"]["blocked_s"] for s in runs.values()],
                name=tr("training blocked"), marker_color=colours["blocked"], row=1, col=2)
    fig.update_yaxes(title_text="MB", row=1, col=1)
    fig.update_yaxes(title_text="s", row=1, col=2)
    fig.update_layout(title=tr(title), barmode="group", height=380, template=TEMPLATE)
    return fig


def resumed_losses_figure(full: list[float], legs: dict[str, dict],
                          title: str = "One run, continued in other layouts") -> go.Figure:
    """The uninterrupted run's losses, and each continued run's (``legs``: label -> summary,
    its losses drawn from its ``first_step``)."""
    fig = go.Figure()
    colours = colours_for(["uninterrupted", *legs])
    fig.add_scatter(x=list(range(len(full))), y=full, mode="lines+markers",
                    name=tr("uninterrupted"), marker=dict(size=11, color=colours["uninterrupted"]),
                    line=dict(color=colours["uninterrupted"]))
    for label, summary in legs.items():
        start = summary["first_step"]
        fig.add_scatter(x=list(range(start, start + len(summary["losses"]))),
                        y=summary["losses"], mode="lines+markers", name=label,
                        line=dict(dash="dash", color=colours[label]),
                        marker=dict(size=6, color=colours[label]))
    fig.update_layout(title=tr(title), xaxis_title=tr("step"), yaxis_title=tr("loss"),
                      height=360, template=TEMPLATE)
    return fig


def lost_work_figure(save_s: float, restart_s: float, per_gpu_hour: float, sizes: tuple,
                     title: str = "GPU-hours lost per day against the checkpoint interval "
                                  "(a formula)") -> go.Figure:
    """For each job size in ``sizes`` (GPUs), GPU-hours lost per day against the interval
    between checkpoints (log axes), with Young's interval marked. A curve, and its mark, is drawn
    only where the first-order share lost is below 1 (fewer GPU-hours than the job's
    ``n × 24``): beyond, the formula has left the range where it holds (``δ ≪ τ ≪ M``). The
    interval axis is ticked in minutes, hours, days; the loss axis at powers of ten."""
    fig = go.Figure()
    intervals = [60 * 10 ** (k / 20) for k in range(0, 81)]   # 1 minute to about 7 days
    drawn = []   # every GPU-hours value plotted, for the loss axis's ticks
    colours = colours_for(sizes)   # a job size's curve and its diamond in one colour
    for n in sizes:
        mtbf = job_mtbf_s(n, per_gpu_hour)
        kept = [(t, lost) for t in intervals
                if (lost := lost_gpu_hours_per_day(t, save_s, mtbf, n, restart_s)) < n * 24]
        drawn += [lost for _, lost in kept]
        best = young_interval(save_s, mtbf)
        line = fig.add_scatter(x=[t / HOUR for t, _ in kept], y=[lost for _, lost in kept],
                               mode="lines", line=dict(color=colours[n]), legendgroup=str(n),
                               name=tr("{n:,} GPUs", n=n)).data[-1]
        at_best = lost_gpu_hours_per_day(best, save_s, mtbf, n, restart_s)
        shown = at_best < n * 24   # as the curves: no diamond where the share lost reaches 1
        fig.add_scatter(x=[best / HOUR] if shown else [], y=[at_best] if shown else [],
                        mode="markers", marker=dict(size=11, symbol="diamond", color=colours[n]),
                        name=tr("{n:,} GPUs: Young's interval {hours:.2g} h", n=n,
                                hours=best / HOUR), legendgroup=str(n))
    fig.update_xaxes(type="log", title_text=tr("time between checkpoints"),
                     tickvals=[hours for hours, _ in INTERVAL_TICKS],
                     ticktext=[tr(label) for _, label in INTERVAL_TICKS])
    fig.update_yaxes(type="log", title_text=tr("GPU-hours lost per day"),
                     **decade_ticks(drawn))
    fig.update_layout(title=tr(title), height=420, template=TEMPLATE)
    return fig


def decade_ticks(values: list[float]) -> dict:
    """A log axis's ticks at the powers of ten that span ``values`` (positive), labelled in
    full ("0.1", "1,000"): none of plotly's 2 and 5 between them. Empty where nothing is drawn."""
    shown = [v for v in values if v > 0]
    if not shown:
        return {}
    powers = range(math.floor(math.log10(min(shown))), math.ceil(math.log10(max(shown))) + 1)
    return dict(tickvals=[10.0 ** p for p in powers],
                ticktext=[f"{10.0 ** p:,.{max(-p, 0)}f}" for p in powers])
