"""Compare finished runs: their measured speedup over one rank, as a live chart and a table."""
from __future__ import annotations

import html
import threading
from collections import defaultdict

import ipywidgets as W
import plotly.graph_objects as go

from ..i18n import show, tr
from .live_figure import LiveFigure
from .series import comparison_key, speedup_rows, weak_scaling


def speedup_figure(rows: list[dict]) -> go.Figure:
    """Measured speedup vs number of ranks, one line per model/batch, with the ideal y = x."""
    top = max([2] + [r["world_size"] for r in rows])
    fig = go.Figure(go.Scatter(x=[1, top], y=[1, top], mode="lines",
                               name=tr("ideal (N ranks = N×)"),
                               line=dict(dash="dash", color="gray")))
    groups = defaultdict(list)
    for row in rows:
        if row["speedup"] is not None:
            groups[row["label"]].append(row)
    for label, group in groups.items():
        group = sorted(group, key=lambda r: r["world_size"])
        fig.add_scatter(x=[r["world_size"] for r in group], y=[r["speedup"] for r in group],
                        mode="lines+markers+text", name=label, textposition="top center",
                        text=[f"{r['speedup']:.2f}×" for r in group])
    fig.update_layout(title=tr("speedup over one rank (tokens/s, same model and global batch)"),
                      xaxis=dict(title=tr("ranks (world size)"), dtick=1),
                      yaxis=dict(title=tr("speedup"), rangemode="tozero"), height=360)
    return fig


def weak_scaling_figure(run: dict, one_rank: dict) -> go.Figure:
    """Weak scaling on a chart of its own: ``run`` on N ranks against ``one_rank`` with the same
    batch per rank (:func:`~gpututor.ui.series.weak_scaling`), as tokens/s over one rank, with
    the ideal y = x. A run without measured throughput draws the ideal only."""
    w = weak_scaling(run, one_rank)
    n = w["world_size"]
    fig = go.Figure(go.Scatter(x=[1, n], y=[1, n], mode="lines", name=tr("ideal (N ranks = N×)"),
                               line=dict(dash="dash", color="gray")))
    if w["throughput_ratio"] is not None:
        fig.add_scatter(x=[1, n], y=[1.0, w["throughput_ratio"]], mode="lines+markers+text",
                        name=tr("weak scaling, {batch} sequences per rank",
                                batch=w["per_rank_batch"]), textposition="top center",
                        text=["1.00×", f"{w['throughput_ratio']:.2f}×"])
    fig.update_layout(title=tr("Weak scaling: tokens/s over one rank, the same batch per rank"),
                      xaxis=dict(title=tr("ranks (world size)"), dtick=1),
                      yaxis=dict(title=tr("tokens/s over one rank"), rangemode="tozero"),
                      height=360)
    return fig


def show_static(*items, always: bool = False) -> None:
    """Display plain ``go.Figure`` copies of panels or comparisons, for front ends that cannot
    draw their live views (VS Code, Colab). A view whose front end reported drawing it
    (``LiveFigure.draw_ms``) needs no copy: only the others are drawn, unless ``always``; where
    every view was drawn, one grey line says so. (Under Run All a browser's report reaches the
    kernel only after the queued cells, so there the copies are drawn.)"""
    from IPython.display import display
    undrawn = [item for item in items if always or getattr(item.view, "draw_ms", None) is None]
    for item in undrawn:
        display(item.static_figure())
    if not undrawn:
        show(tr("The live plots above were drawn by this front end: no static copies needed."),
             kind="note")


class Comparison:
    """The summaries of the finished runs made here, plotted as speedup over one rank.

    The chart is a plain ``go.Figure`` (:func:`speedup_figure`) drawn by a
    :class:`~gpututor.ui.live_figure.LiveFigure`, not a plotly ``FigureWidget``: each of those
    loads plotly.js (about 5 MB) into the browser, which took a core of a 2-core laptop away from
    the runs measured right after it was shown (benchmarks/bench_live_view.py)."""

    def __init__(self):
        self.summaries: list[dict] = []
        self._lock = threading.Lock()
        self.fig = speedup_figure([])
        self.view = LiveFigure()
        self.view.show(self.fig)
        self.table = W.HTML()
        self.widget = W.VBox([self.view, self.table])

    def add(self, summary: dict) -> None:
        """Keep a finished run's summary and redraw."""
        with self._lock:
            self.summaries.append(summary)
            rows = self.rows()
            self.fig = speedup_figure(rows)
            self.view.show(self.fig)
            self.table.value = _rows_html(rows)

    def rows(self) -> list[dict]:
        return speedup_rows(self.summaries)

    def pin(self, spec):
        """``spec`` with ``device="auto"`` fixed to the CPU when this comparison's runs ran on
        the CPU, so that a 1-rank run next to them is not put on a GPU they could not use (and
        then compared with them). Other specs come back unchanged."""
        kinds = {str(s["device"]).split(":")[0] for s in self.summaries}
        if spec.device == "auto" and kinds == {"cpu"} and spec.resolved_device() == "cuda":
            return spec.replace(device="cpu")
        return spec

    def speedup(self, summary: dict) -> float | None:
        """The speedup of one of the kept runs (None until a 1-rank run of its key exists)."""
        return self.rows()[self.summaries.index(summary)]["speedup"]

    def explain(self) -> str:
        """The measured speedups in words."""
        lines = []
        for r in self.rows():
            if r["world_size"] == 1:
                continue
            if r["speedup"] is None:
                elsewhere = [s for s in self.summaries if s["world_size"] == 1
                             and comparison_key(s)[:-1] == r["key"][:-1] and s["tokens_per_s"]]
                if elsewhere:
                    why = tr("the 1-rank run ran on {there}, this one on {here}; a speedup across "
                             "kinds of device would compare the devices, not the parallelism, "
                             "so none is given (pin both: RunSpec.pin_device)",
                             there=elsewhere[-1]["device"], here=r["device"])
                else:
                    why = tr("no 1-rank run of the same model and batch yet, so no speedup.")
                lines.append(tr("{strategy} on {n} ranks ({label}): {why}", strategy=r["strategy"],
                                n=r["world_size"], label=r["label"], why=why))
                continue
            if r["comm_s"] is None:
                split = tr("communication not measured for this strategy")
            else:
                split = tr("compute {compute:.0f} ms, waiting for communication {comm:.0f} ms",
                           compute=r["compute_s"] * 1e3, comm=r["comm_s"] * 1e3)
            lines.append(tr(
                "{strategy} on {n} ranks: {tokens:,.0f} tokens/s vs {baseline:,.0f} on 1 rank = "
                "{speedup:.2f}× (ideal {n}×, scaling efficiency {efficiency:.0%}). Per step and "
                "rank: {split}.", strategy=r["strategy"], n=r["world_size"],
                tokens=r["tokens_per_s"], baseline=r["baseline_tokens_per_s"],
                speedup=r["speedup"], efficiency=r["efficiency"], split=split))
        return "\n".join(lines) or tr("No run on more than one rank yet.")

    def static_figure(self) -> go.Figure:
        return speedup_figure(self.rows())

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def _rows_html(rows: list[dict]) -> str:
    fmt = lambda v, spec, scale=1: tr("not measured") if v is None else format(v * scale, spec)
    head = "".join(f"<th>{tr(h)}</th>" for h in ("run", "strategy", "ranks", "tokens/s",
                                                 "speedup", "efficiency", "compute ms/step",
                                                 "comm ms/step"))
    body = "".join(
        f"<tr><td>{html.escape(r['label'])}</td><td>{r['strategy']}</td>"
        f"<td>{r['world_size']}</td><td>{fmt(r['tokens_per_s'], ',.0f')}</td>"
        f"<td>{fmt(r['speedup'], '.2f')}</td><td>{fmt(r['efficiency'], '.0%')}</td>"
        f"<td>{fmt(r['compute_s'], '.0f', 1e3)}</td><td>{fmt(r['comm_s'], '.1f', 1e3)}</td></tr>"
        for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
