"""How the lessons' figures look, in one place: plotly's template, the usual height and margins.
Every figure module (``ui.plots``, ``ui.comparison``, each lesson's ``figures``) draws with these;
a figure that needs more room says so beside its call."""
from __future__ import annotations

TEMPLATE = "plotly_white"
HEIGHT = 360                                   # pixels: a figure beside a paragraph
MARGIN = dict(l=60, r=20, t=80, b=50)          # room for a two-line title and the axis titles
LAYOUT = dict(template=TEMPLATE, height=HEIGHT, margin=MARGIN)
