"""A live view that costs the run it shows next to nothing: a plotly figure's line, bar and
Gantt (horizontal bars with a base) traces drawn on canvases by a few kilobytes of JavaScript
(``live_figure.js``, an anywidget).

Why not plotly's ``FigureWidget`` while ranks train: each new one sends and evaluates plotly.js
(about 5 MB) in the browser and lays out SVG on every update. In JupyterLab + Chromium on 2 cores
that took the browser 11-13 CPU-s per 10-20 s run and DDP on 2 ranks lost 40 % of its tokens/s
(benchmarks/bench_live_view.py measures it; its figures are in issue 25's closing notes). Here
the figure stays a plain ``go.Figure`` in the kernel (the one home of what is plotted: titles,
traces, names), and :meth:`LiveFigure.show` sends only its numbers: a few hundred values, redrawn
in about a millisecond. ``draw_ms`` comes back from the front end: the browser's own drawing
time, ``None`` until a browser has drawn it (nbval, a script: nothing draws).
"""
from __future__ import annotations

import math
from pathlib import Path

import anywidget
import plotly.graph_objects as go
import traitlets

ESM = (Path(__file__).resolve().parent / "live_figure.js").read_text(encoding="utf-8")


def _number(value):
    """A JSON-safe value: floats and ints as they are, anything not finite as None."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _spans(trace, chart: dict, fig: go.Figure) -> None:
    """A horizontal bar trace with a ``base`` (a Gantt chart: one row per category, one bar
    from ``base`` to ``base + x``) as a series of spans; the rows in the y axis's order."""
    rows = [str(y) for y in (trace.y or ())]
    order = list(fig.layout.yaxis.categoryarray or ())
    for row in rows:
        if row not in chart["rows"]:
            chart["rows"].append(row)
    if order:
        chart["rows"].sort(key=lambda r: order.index(r) if r in order else len(order))
    color = trace.marker.color if isinstance(trace.marker.color, str) else None
    chart["series"].append({"name": trace.name or "", "color": color, "row": rows,
                            "start": [_number(b) for b in (trace.base or ())],
                            "length": [_number(x) for x in (trace.x or ())],
                            "label": [str(t) for t in (trace.text or ())]})


def charts_of(fig: go.Figure) -> list[dict]:
    """The subplots of ``fig`` (``make_subplots``; its subplot titles are its annotations, in
    order) as the charts the front end draws: scatter traces become lines (dashed where the
    trace is), bar traces stacked bars over their categories, a scatter trace in a subplot of
    bars a mark over each bar, and horizontal bars with a base (a Gantt chart) spans in rows.
    A line keeps its trace's color where the trace sets one (a failure's marker)."""
    # a figure of one plot has no subplot titles: its own title names the chart
    titles = [a.text or "" for a in fig.layout.annotations] or [fig.layout.title.text or ""]
    charts: dict[int, dict] = {}
    for trace in fig.data:
        index = int((trace.xaxis or "x")[1:] or 1) - 1
        axis = fig.layout["xaxis" if index == 0 else f"xaxis{index + 1}"]
        spans = trace.type == "bar" and trace.orientation == "h"
        chart = charts.setdefault(index, {
            "title": titles[index] if index < len(titles) else "",
            "xlabel": (axis.title.text or "") if axis is not None else "",
            "kind": "spans" if spans else "bars" if trace.type == "bar" else "lines",
            "series": [], **({"rows": []} if spans else {})})
        if chart["kind"] == "spans":
            if spans:
                _spans(trace, chart, fig)
            continue
        xs, ys = list(trace.x or ()), [_number(y) for y in (trace.y or ())]
        if chart["kind"] == "bars" and trace.type == "bar":
            chart["categories"] = [str(x) for x in xs]
            chart["series"].append({"name": trace.name or "", "y": ys})
        elif chart["kind"] == "bars":   # points over bars (a formula's value): a mark per bar
            chart.setdefault("marks", []).append({"name": trace.name or "", "y": ys})
        else:
            line = trace.line if trace.type == "scatter" and trace.line else None
            color = line.color if line is not None and isinstance(line.color, str) else None
            chart["series"].append({"name": trace.name or "", "x": [_number(x) for x in xs],
                                    "y": ys, "dash": (line.dash if line is not None else None)
                                    or "solid", **({"color": color} if color else {})})
    return [charts[i] for i in sorted(charts)]


class LiveFigure(anywidget.AnyWidget):
    """Shows a ``go.Figure`` of line and bar subplots; :meth:`show` redraws it."""

    _esm = ESM
    charts = traitlets.List().tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    draw_ms = traitlets.Float(None, allow_none=True).tag(sync=True)   # set by the front end

    def show(self, fig: go.Figure) -> None:
        """Draw ``fig`` now (its numbers are sent; the front end redraws)."""
        with self.hold_sync():
            self.title = (fig.layout.title.text or "") if fig.layout.annotations else ""
            self.charts = charts_of(fig)
