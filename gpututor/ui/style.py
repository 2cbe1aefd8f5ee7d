"""How the lessons' figures look, in one place: plotly's template, the usual height and margins,
and one palette. Every figure module (``ui.plots``, ``ui.comparison``, ``ui.panel``, each lesson's
``figures``) draws with these; a figure that needs more room says so beside its call.

The palette: a thing keeps its colour in every figure of every lesson, live or static. Memory
categories, compute and waiting, the phases of a step and the ways of splitting a sequence each
have a fixed colour (:data:`COLOURS`); anything else (GPUs, GPU counts, attention ways, runs)
takes the palette's colours in order (:func:`colours_for`), and a figure that draws one thing in
several traces (one per subplot) gives each the thing's colour, so its legend shows the colour
drawn (``tests/lesson_outputs.py`` checks every lesson's figures). The ten colours are Tableau
10's, as Vega-Lite orders them (Vega-Lite's documentation, "Scale: scheme"): told apart by most
colour-blind readers, none of them red-on-green for compute and waiting.
"""
from __future__ import annotations

import plotly.io as pio

HEIGHT = 360                                   # pixels: a figure beside a paragraph
MARGIN = dict(l=60, r=20, t=80, b=50)          # room for a two-line title and the axis titles
SERIES = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b",
          "#9d755d", "#ff9da6", "#bab0ac")
# plotly_white with the palette as its colour cycle: a trace that sets no colour takes the next
# of SERIES (plotly's documentation, "Theming and templates": templates combine with "+")
pio.templates["gpututor"] = dict(layout=dict(colorway=list(SERIES)))
TEMPLATE = "plotly_white+gpututor"
LAYOUT = dict(template=TEMPLATE, height=HEIGHT, margin=MARGIN)
COLOURS = {
    # memory, by category (the panels' bars, the static figures' stacks)
    "params": SERIES[0], "grads": SERIES[1], "optimizer": SERIES[2], "activations": SERIES[5],
    "other": SERIES[9],
    # a step's time
    "compute": SERIES[0], "communication": SERIES[1], "not measured": SERIES[9],
    "forward": SERIES[0], "backward": SERIES[1], "weights": SERIES[2],
    # a step's timeline (ui.step_timeline): the other phases and each kind of collective
    "optimizer step": SERIES[2], "sync": SERIES[9], "gather": SERIES[5],
    "all_reduce": SERIES[3], "all_gather": SERIES[4], "reduce_scatter": SERIES[6],
    "send": SERIES[7], "all_to_all": SERIES[8],
    "waiting on all-reduce": "#fbd3ad",   # a pale backward orange: backward's tail, not computing
    # splitting a sequence over ranks (lesson 10)
    "contiguous": SERIES[1], "zigzag": SERIES[0],
}


def colours_for(names) -> dict:
    """A colour for each of ``names`` (in order; the palette repeats after ten)."""
    return {name: SERIES[i % len(SERIES)] for i, name in enumerate(dict.fromkeys(names))}
