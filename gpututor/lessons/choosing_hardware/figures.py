"""A planner you can play with: sliders for the model, the tokens and the hardware, a ranked table.

:class:`PlannerWidget` calls :func:`gpututor.plan.recommend.recommend` whenever a control
changes and shows the configurations that fit (best first) with their memory per GPU, time and
cost, the reason for each, and the notes: when one GPU is enough, when the link is the limit.
Every row fits in memory (its "fits" column says so; what does not fit is counted in the
notes). The planner's assumptions are controls too: the share of peak reached (HFU), tokens per
step, the links' efficiency, how much of data parallel's traffic backward hides, sequence
parallel with tensor parallel, causal attention. Everything shown is a formula's answer
(``gpututor/plan``), not a measurement.
"""
from __future__ import annotations

import html
import math

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...i18n.shown import NO_MATH, table_html
from ... import catalog, checks
from ...plan.memory import transformer_for_params
from ...plan.recommend import (DEFAULT_CAUSAL, DEFAULT_COMM_EFFICIENCY, DEFAULT_HFU,
                              DEFAULT_OVERLAP, DEFAULT_SEQUENCE_PARALLEL,
                              DEFAULT_TOKENS_PER_STEP, Recommendation, planned_precision,
                              recommend)
from ...plan.ranking import sentence
from ...ui.style import SERIES, TEMPLATE
from ...catalog import GB
from ...formulas import MB

GPU_COUNTS = [2 ** k for k in range(13)]          # 1 .. 4096 GPUs


def recommendation_html(rec: Recommendation, top: int = 8) -> str:
    """The recommendation's headline, the ranked configurations as an HTML table (numbers to
    the right), then the other notes and the best one's reasons."""
    esc = html.escape
    columns = [tr("#"), tr("configuration"), tr("GB per GPU"), tr("fits"), tr("days"),
               tr("cost ({currency})", currency=catalog.currency()),
               tr("meets deadline and budget"), tr("link-bound")]
    yes, no = tr("yes"), tr("no")
    rows = [[str(i), e.config.shown, f"{e.memory['total'] / GB:,.1f}", yes if e.fits else no,
             f"{e.days:,.2f}", f"{e.cost:,.0f}" if e.cost is not None else tr("not priced"),
             yes if e.meets else no, yes if e.link_bound else ""]
            for i, e in enumerate(rec.ranked[:top], 1)]
    table = table_html(columns, rows) if rows else \
        f"<p>{esc(tr('no configuration fits: see the notes'))}</p>"
    notes = "".join(f"<li>{esc(n)}</li>" for n in rec.notes if n != rec.headline)
    best = rec.ranked[0] if rec.ranked else (rec.rejected[-1] if rec.rejected else None)
    why = "".join(f"<li>{esc(r)}</li>" for r in best.reasons) if best else ""
    title = tr("why the first one") if rec.ranked else tr("why even the largest tried does not fit")
    # MathJax's ignore classes: prices carry "$", which MathJax would read as maths
    return (f"<div class='{NO_MATH}'><p><b>{esc(sentence(rec.headline))}</b></p>{table}"
            f"<p><b>{tr('notes')}</b></p><ul>{notes or '<li>' + tr('none') + '</li>'}</ul>"
            f"<p><b>{title}</b></p><ul>{why}</ul></div>")


class PlannerWidget:
    """Model size, tokens, GPU, count, link, budget, deadline and price -> ranked configurations.

    ``count`` is the most GPUs to consider: every power of two up to it is tried, so the table
    shows whether fewer would do. Display ``.widget`` in a notebook; :meth:`update` recomputes
    (called on every change) and returns the :class:`Recommendation`.
    """

    def __init__(self, params: float = 7e9, tokens: float = 140e9, gpu: str = "H100-80GB",
                 count: int = 64, link: str | None = None, budget: float = 50_000,
                 deadline_days: float = 30, price_per_hour: float | None = None,
                 seq_len: int = 2048):
        gpu_entry = catalog.get_gpu(gpu)
        checks.choice("count", count, GPU_COUNTS)
        price, _ = catalog.price_of(gpu_entry, price_per_hour)
        log = lambda desc, value, lo, hi, fmt: W.FloatLogSlider(
            value=value, base=10, min=lo, max=hi, step=0.05, description=tr(desc),
            readout_format=fmt, continuous_update=False, style={"description_width": "9em"},
            layout=W.Layout(width="34em"))
        self.seq_len = seq_len
        self.params = log("model size", params, 7, 12.3, ".3g")
        self.tokens = log("tokens", tokens, 8, 13.3, ".3g")
        self.gpu = W.Dropdown(options=list(catalog.GPUS), value=gpu_entry.name,
                              description=tr("GPU"), style={"description_width": "9em"})
        self.count = W.SelectionSlider(options=GPU_COUNTS, value=count, description=tr("up to GPUs"),
                                       continuous_update=False,
                                       style={"description_width": "9em"})
        self.link = W.Dropdown(options=list(catalog.LINKS), value=link or gpu_entry.links[0],
                               description=tr("link in a node"),
                               style={"description_width": "9em"})
        self.budget = log(tr("budget ({currency})", currency=catalog.currency()), budget, 1, 8, ",.0f")
        self.deadline = log("deadline (days)", deadline_days, -2, 3, ".3g")
        self.price = W.BoundedFloatText(value=price or 0.0, min=0, max=1000, step=0.1,
                                        description=tr("{currency}/GPU-hour",
                                                       currency=catalog.currency()),
                                        style={"description_width": "9em"})
        short = {"style": {"description_width": "14em"}, "layout": W.Layout(width="26em")}
        self.hfu = W.FloatSlider(value=DEFAULT_HFU, min=0.05, max=0.8, step=0.01,
                                 description=tr("HFU (share of peak)"), readout_format=".0%",
                                 continuous_update=False, **short)
        self.tokens_per_step = W.SelectionSlider(
            options=[(f"2^{k}", 2 ** k) for k in range(16, 25)], value=DEFAULT_TOKENS_PER_STEP,
            description=tr("tokens per step"), continuous_update=False, **short)
        self.comm_efficiency = W.FloatSlider(value=DEFAULT_COMM_EFFICIENCY, min=0.1, max=1.0,
                                             step=0.05, readout_format=".0%",
                                             description=tr("share of link rate"),
                                             continuous_update=False, **short)
        self.overlap = W.FloatSlider(value=DEFAULT_OVERLAP, min=0.0, max=1.0, step=0.05,
                                     readout_format=".0%",
                                     description=tr("backward hiding dp traffic"),
                                     continuous_update=False, **short)
        self.sequence_parallel = W.Checkbox(value=DEFAULT_SEQUENCE_PARALLEL,
                                            description=tr("sequence parallel with tp"))
        self.causal = W.Checkbox(value=DEFAULT_CAUSAL, description=tr("causal attention"))
        self.output = W.HTML()
        self.status = W.HTML()
        self.recommendation: Recommendation | None = None
        controls = [self.params, self.tokens, self.gpu, self.count, self.link, self.budget,
                    self.deadline, self.price]
        assumptions = [self.hfu, self.tokens_per_step, self.comm_efficiency, self.overlap,
                       self.sequence_parallel, self.causal]
        self.gpu.observe(self._gpu_changed, names="value")   # first: its price, then the rest
        for control in controls + assumptions:
            control.observe(self.update, names="value")
        self.widget = W.VBox([W.HBox([W.VBox(controls[:4]), W.VBox(controls[4:])]),
                              W.HTML(f"<b>{tr('assumptions')}</b>"),
                              W.HBox([W.VBox(assumptions[:3]), W.VBox(assumptions[3:])]),
                              self.status, self.output])
        self.update()

    def _gpu_changed(self, change) -> None:
        gpu = catalog.get_gpu(change["new"])
        price, _ = catalog.price_of(gpu)
        with self.price.hold_trait_notifications():
            self.price.value = price or 0.0

    def update(self, *_) -> Recommendation:
        """Recompute the ranking from the controls and redraw the table."""
        model = transformer_for_params(self.params.value, seq_len=self.seq_len)
        counts = [c for c in GPU_COUNTS if c <= self.count.value]
        price = self.price.value if self.price.value > 0 else None
        gpu = catalog.get_gpu(self.gpu.value)
        precision = planned_precision(gpu)   # V100, T4: fp16 with loss scaling (no bf16 units)
        try:
            rec = recommend(model, self.tokens.value, gpus=(gpu.name,), counts=counts,
                            links=(self.link.value,), budget=self.budget.value,
                            deadline_days=self.deadline.value, price_per_hour=price,
                            precision=precision, hfu=self.hfu.value,
                            tokens_per_step=self.tokens_per_step.value,
                            comm_efficiency=self.comm_efficiency.value,
                            overlap=self.overlap.value,
                            sequence_parallel=self.sequence_parallel.value,
                            causal_attention=self.causal.value)
        except ValueError as exc:   # e.g. a GPU without bf16 units
            self.status.value = f"<b style='color:#cf222e'>{html.escape(str(exc))}</b>"
            self.output.value = ""
            return None
        self.recommendation = rec
        self.status.value = tr("{model} parameters ({layers} layers x {width}), {precision} with "
                               "Adam, {tokens:.3g} tokens, {steps:,} steps of {per_step:,} tokens",
                               model=model.name, layers=model.n_layer, width=model.d_model,
                               precision=precision, tokens=self.tokens.value,
                               per_step=self.tokens_per_step.value,
                               steps=math.ceil(self.tokens.value / self.tokens_per_step.value))
        if precision != "bf16":
            self.status.value += tr("; {gpu} has no bf16: fp16 with loss scaling", gpu=gpu.name)
        self.output.value = recommendation_html(rec)
        return rec

    def static_html(self) -> str:
        """What the widget shows now, as plain HTML (for front ends without widgets), kept
        from MathJax (its prices carry "$")."""
        return f"<div class='{NO_MATH}'><p>{self.status.value}</p>{self.output.value}</div>"


def calibration_figure(cal) -> go.Figure:
    """Two panels: peak memory and step time per run, predicted next to measured
    (``cal`` is a :class:`gpututor.lessons.choosing_hardware.calibrate.Calibration`)."""
    labels = [r["run"] for r in cal.rows]
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("peak memory per rank (MB)"),
                                                        tr("step time (ms)")))
    for name, key, scale, col in (("measured", "measured_peak", 1 / MB, 1),
                                  ("predicted", "predicted_peak", 1 / MB, 1),
                                  ("measured", "measured_step_s", 1e3, 2),
                                  ("predicted", "predicted_step_s", 1e3, 2)):
        fig.add_bar(x=labels, y=[r[key] * scale for r in cal.rows], name=tr(name),
                    legendgroup=name, showlegend=col == 1,
                    marker_color="#4c78a8" if name == "measured" else "#f58518", row=1, col=col)
    fig.update_layout(barmode="group", template=TEMPLATE, height=420,
                      title=tr("The planner's predictions and the measured runs, on this machine"),
                      margin=dict(l=60, r=20, t=80, b=120))
    return fig


def days_text(days: float) -> str:
    """A number of days as a tick label: two significant figures below 10, whole days above."""
    return f"{days:.2g}" if days < 10 else f"{days:,.0f}"


def log_ticks(values, keep=(), most: int = 8) -> list[float]:
    """Where to put the ticks of a log axis: at plotted ``values``, ``keep`` first (the values
    the figure marks), then the others from the smallest, each at least 1/``most`` of the
    values' span (in decades, at least half a decade) away from those taken, so their labels
    never overlap."""
    shown = sorted({v for v in list(values) + list(keep) if v and v > 0})
    if not shown:
        return []
    gap = max(math.log10(shown[-1] / shown[0]), 0.5) / most
    taken: list[float] = []
    for v in [k for k in keep if k and k > 0] + shown:
        if all(abs(math.log10(v / t)) >= gap for t in taken):
            taken.append(v)
    return sorted(taken)


def gpu_choice_figure(rec: Recommendation, deadline_days: float | None = None,
                      budget: float | None = None) -> go.Figure:
    """Cost against days for each GPU type of ``rec``: a line through the best layout that fits
    at each GPU count (labelled with the count), a star on the type's best (the one ranked
    first); a GPU type without a price is drawn as dotted vertical lines at its days (cost not
    known, never 0). ``deadline_days`` and ``budget`` are drawn as dashed lines."""
    per_count: dict = {}
    for e in rec.ranked:          # ranked: the first seen per (GPU, count) is the better
        per_count.setdefault((e.config.gpu, e.config.count), e)
    fig = go.Figure()
    best = rec.best_per_gpu()
    costs = [e.cost for e in per_count.values() if e.cost is not None] + [budget or 0]
    top = 1.1 * max(costs) if max(costs) > 0 else 1.0   # vertical lines span the cost axis
    for i, gpu in enumerate(best):
        colour = SERIES[i % len(SERIES)]
        rows = sorted((e for (g, _), e in per_count.items() if g == gpu), key=lambda e: e.days)
        if best[gpu].cost is None:   # no price: where on the cost axis is not known
            for j, e in enumerate(rows):
                fig.add_scatter(x=[e.days, e.days], y=[0, top], mode="lines+text",
                                text=["", str(e.config.count)], textposition="top center",
                                name=tr("{gpu}: not priced (days only)", gpu=gpu),
                                legendgroup=gpu, showlegend=j == 0,
                                line=dict(color=colour, dash="dot"),
                                hovertext=e.config.shown, hoverinfo="text+x")
            continue
        fig.add_scatter(x=[e.days for e in rows], y=[e.cost for e in rows],
                        mode="lines+markers+text", text=[str(e.config.count) for e in rows],
                        textposition="top center",
                        name=tr("{gpu}: best layout per GPU count", gpu=gpu),
                        line=dict(color=colour), legendgroup=gpu,
                        hovertext=[e.config.shown for e in rows], hoverinfo="text+x+y")
        fig.add_scatter(x=[best[gpu].days], y=[best[gpu].cost], mode="markers",
                        marker=dict(symbol="star", size=16, color=colour),
                        name=tr("{gpu}: the best", gpu=gpu), legendgroup=gpu,
                        hovertext=[best[gpu].config.shown], hoverinfo="text")
    if deadline_days is not None:
        fig.add_scatter(x=[deadline_days, deadline_days], y=[0, top], mode="lines",
                        name=tr("deadline"), line=dict(color="#888", dash="dash"))
    if budget is not None:   # named in the legend: a label on the line would sit on the points
        fig.add_hline(y=budget, line=dict(color="#888", dash="dot"))
        fig.add_scatter(x=[None], y=[None], mode="lines", name=tr("budget"),
                        line=dict(color="#888", dash="dot"))
    days = [e.days for e in per_count.values()]
    ticks = log_ticks(days, keep=([deadline_days] if deadline_days else [])
                      + [e.days for e in best.values()])
    fig.update_layout(template=TEMPLATE, height=460,
                      title=tr("Cost against days, per GPU type (numbers: GPU count; every point "
                               "fits)"),
                      xaxis=dict(title=tr("days"), type="log", tickvals=ticks,
                                 ticktext=[days_text(t) for t in ticks], minor=dict(showgrid=False)),
                      yaxis=dict(title=tr("cost ({currency})", currency=catalog.currency()),
                                 rangemode="tozero"),
                      margin=dict(l=70, r=20, t=70, b=60))
    return fig
