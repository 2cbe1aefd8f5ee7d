"""Figures of lesson 01c's profile: the operators with the most self time, and a step's timeline.

Both read the plain rows of ``gpututor.measure.profile.Profile``; nothing here measures.
"""
from __future__ import annotations

import plotly.graph_objects as go

from ...i18n import tr
from ...measure.profile import OP_KINDS, PHASES, Profile
from ...ui.style import TEMPLATE

MS = 1e3
CATEGORY_COLORS = {"compute": "#1f77b4", "copy": "#ff7f0e", "other": "#7f7f7f"}
PHASE_COLORS = {"forward": "#2ca02c", "backward": "#d62728", "optimizer": "#9467bd"}


def top_ops_figure(rows: list[dict]) -> go.Figure:
    """Horizontal bars of each operator's self time (ms), the largest on top, coloured by
    category; hovering shows its calls and its share of the wall time."""
    rows = list(reversed(rows))                 # plotly draws the first bar at the bottom
    fig = go.Figure(go.Bar(
        orientation="h", y=[r["name"] for r in rows], x=[r["self_s"] * MS for r in rows],
        marker_color=[CATEGORY_COLORS.get(r.get("category"), "#7f7f7f") for r in rows],
        customdata=[[r["calls"], r["share"] * 100, tr(r.get("category", ""))] for r in rows],
        # a plotly template, not a str.format one: tr() is called without values
        hovertemplate=tr("%{y}: %{x:.2f} ms self<br>%{customdata[0]} calls, "
                         "%{customdata[1]:.1f} % of the wall time (%{customdata[2]})"
                         "<extra></extra>"),
        showlegend=False))
    fig.update_layout(title=tr("Operators by self time (measured)"),
                      xaxis_title=tr("self time (ms)"),
                      height=max(300, 28 * len(rows) + 120), template=TEMPLATE,
                      margin=dict(l=200))
    return fig


def breakdown_shares(profile: Profile) -> dict[str, float]:
    """Shares of the wall time: compute, copy, other and idle (they add up to 1)."""
    parts = profile.breakdown()
    return {name: parts[f"{name}_s"] / parts["wall_s"] for name in (*OP_KINDS, "idle")}


def timeline_figure(profile: Profile) -> go.Figure:
    """A Gantt-like chart in ms: a row of phases (one trace per phase) above a row of the
    outermost operators (one trace per category); the title gives the breakdown's shares."""
    fig = go.Figure()
    phases = profile.phases()
    for phase in PHASES:
        mine = [r for r in phases if r["phase"] == phase]
        fig.add_bar(
            orientation="h", name=tr(phase), y=[tr("phases")] * len(mine),
            base=[r["start_s"] * MS for r in mine],
            x=[(r["end_s"] - r["start_s"]) * MS for r in mine],
            marker_color=PHASE_COLORS[phase], customdata=[r["step"] for r in mine],
            hovertemplate=tr("{phase}, step %{{customdata}}: %{{x:.2f}} ms from %{{base:.2f}} ms"
                             "<extra></extra>", phase=tr(phase)))
    ops = profile.timeline()
    for kind in OP_KINDS:
        mine = [r for r in ops if r["category"] == kind]
        fig.add_bar(
            orientation="h", name=tr(kind), y=[tr("operators")] * len(mine),
            base=[r["start_s"] * MS for r in mine],
            x=[(r["end_s"] - r["start_s"]) * MS for r in mine],
            marker_color=CATEGORY_COLORS[kind], marker_line_width=0,
            customdata=[[r["name"], tr(r["phase"] or "between phases"), r["step"]] for r in mine],
            hovertemplate=tr("%{customdata[0]}: %{x:.3f} ms<br>"
                             "%{customdata[1]}, step %{customdata[2]}<extra></extra>"))
    shares = breakdown_shares(profile)
    title = tr("Where the wall time went: {shares}", shares=", ".join(
        f"{tr(name)} {share:.0%}" for name, share in shares.items()))
    fig.update_layout(title=title, barmode="overlay",
                      xaxis_title=tr("time since the first step (ms)"),
                      yaxis=dict(categoryorder="array",
                                 categoryarray=[tr("operators"), tr("phases")]),
                      height=320, template=TEMPLATE, legend_traceorder="normal")
    return fig
