"""What a learner must not see under Run All (issue 47), read from an executed notebook's outputs.

- an error or anything on stderr: a traceback, a warning box, a rank's red text (``%%ranks``
  draws a rank's stderr and traceback in red, ``#b00``), except in cells named as showing one on
  purpose;
- a printed line wider than the cell: monospace text (a stream, or a plain-text result without a
  richer form) does not wrap in a way a reader can follow; :data:`CELL_COLUMNS` columns of a
  fixed-width font, a Chinese character taking two (JupyterLab's default notebook width with the
  file browser open holds about 100 at its default font size);
- a figure whose legend shows a colour its traces do not draw in: plotly gives every trace the
  next colour of its cycle unless the trace sets one, so two traces of one legend entry (one
  ``legendgroup``, or one name) drawn without one colour set on each draw in different colours
  while the legend shows the first's.
"""
from __future__ import annotations

import re

from gpututor.i18n.shown import columns_of

CELL_COLUMNS = 100
PLOTLY = "application/vnd.plotly.v1+json"
RED = re.compile(r"color:\s*#b00\b")


def _text(value) -> str:
    return value if isinstance(value, str) else "".join(value)


def trace_colour(trace: dict):
    """The colour a trace sets for itself (marker, line or fill), or None (plotly's cycle)."""
    for part in ("marker", "line"):
        colour = (trace.get(part) or {}).get("color")
        if isinstance(colour, str):
            return colour
        if colour is not None:          # a colour per point: the legend shows none of them alone
            return "per point"
    return trace.get("fillcolor")


def legend_mismatches(figure: dict) -> list[str]:
    """The legend entries of a plotly figure (as JSON) whose traces are not all drawn in one
    colour they set themselves."""
    groups: dict = {}
    for trace in figure.get("data", []):
        if trace.get("type") in ("heatmap", "table", "pie", "sankey", "indicator"):
            continue                     # drawn from a colour scale or cells, not a legend entry
        key = trace.get("legendgroup") or trace.get("name")
        if key:
            groups.setdefault(key, []).append(trace_colour(trace))
    return [f"{key!r} drawn in {colours}" for key, colours in groups.items()
            if len(colours) > 1 and (None in colours or len(set(colours)) > 1)]


def output_problems(nb, on_purpose: dict | None = None, cell_of=None) -> list[str]:
    """Every problem of the list above in the executed notebook ``nb`` (a dict or an
    ``nbformat`` node), as "cell N: what". ``on_purpose``: {cell: why} for cells that show an
    error or stderr on purpose; ``cell_of(index, cell)``: the number to name a cell by (default
    its index)."""
    on_purpose = on_purpose or {}
    found = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        name = cell_of(index, cell) if cell_of else index
        if name is None:                 # a cell the test added, not the lesson's
            continue
        for out in cell.get("outputs", []):
            kind, data = out["output_type"], out.get("data", {})
            if kind == "error" and name not in on_purpose:
                found.append(f"cell {name}: {out['ename']}: {out['evalue'][:200]}")
            elif kind == "stream" and out["name"] == "stderr" and name not in on_purpose:
                found.append(f"cell {name}: on stderr: {_text(out['text'])[:200]!r}")
            monospace = _text(out.get("text", "")) if kind == "stream" and out["name"] == "stdout" \
                else _text(data.get("text/plain", "")) if kind in ("execute_result", "display_data") \
                and not any(k != "text/plain" for k in data) else ""
            wide = [line for line in monospace.splitlines() if columns_of(line) > CELL_COLUMNS]
            if wide:
                found.append(f"cell {name}: {len(wide)} printed line(s) wider than {CELL_COLUMNS} "
                             f"columns, the first: {wide[0][:120]!r}")
            page = _text(data.get("text/html", ""))
            if RED.search(page) and name not in on_purpose:
                found.append(f"cell {name}: red text (a rank's stderr or traceback): "
                             f"{re.sub(r'<[^>]+>', ' ', page)[:200]!r}")
            if PLOTLY in data:
                found += [f"cell {name}: legend entry {m}" for m in legend_mismatches(data[PLOTLY])]
    return found
