"""A run's timeline drawn: every rank's compute phases and collectives on one clock, a lane
each, so overlap (a collective under backward), waiting (a gap in compute) and the order of a
schedule are seen rather than read. The spans are those ``RunSpec(timeline=True)`` records
(``gpututor.measure.timeline``)."""
from __future__ import annotations

import plotly.graph_objects as go

from ..i18n import tr
from .style import COLOURS, LAYOUT, colours_for

PHASE_NAMES = {"optimizer": "optimizer step"}   # its colour is not the optimizer state's


def step_timeline(records: list[dict], steps: list[int] | None = None,
                  title: str | None = None) -> go.Figure:
    """Horizontal bars per rank (two lanes: compute, collectives) for ``steps`` (default: the
    last two steps that have a timeline), in milliseconds from the first span drawn. A bar's
    colour is its phase or its kind of collective; hovering shows its bytes and group."""
    timed = [r for r in records if r.get("timeline")]
    if not timed:
        raise ValueError("no record has a timeline: launch the run with RunSpec(timeline=True)")
    have = sorted({r["step"] for r in timed})
    chosen = [s for s in (steps if steps is not None else have[-2:]) if s in have]
    if not chosen:
        raise ValueError(f"steps={steps!r} has no timeline: the steps recorded are {have}")
    shown = [r for r in timed if r["step"] in chosen]
    origin = min(span["start"] for r in shown for span in r["timeline"])
    ranks = sorted({r["rank"] for r in shown})
    lanes = {(rank, kind): tr("rank {rank} · {kind}", rank=rank, kind=tr(kind))
             for rank in reversed(ranks) for kind in ("collective", "compute")}
    bars: dict[str, dict] = {}
    for r in shown:
        for span in r["timeline"]:
            name = PHASE_NAMES.get(span["name"], span["name"]) if span["kind"] == "compute" \
                else span["name"]
            bar = bars.setdefault(name, {"base": [], "x": [], "y": [], "text": [], "end": []})
            bar["base"].append((span["start"] - origin) * 1e3)
            bar["x"].append(max(span["end"] - span["start"], 0.0) * 1e3)
            bar["end"].append(bar["base"][-1] + bar["x"][-1])
            bar["y"].append(lanes[r["rank"], span["kind"]])
            bar["text"].append(tr("in step {step}", step=r["step"]) + (
                "" if span["bytes"] is None else
                tr(" · {mb:.3f} MB among {group} ranks", mb=span["bytes"] / 1e6,
                   group=span["group"])))
    spare = colours_for([n for n in bars if n not in COLOURS])
    fig = go.Figure()
    for name, bar in bars.items():
        fig.add_bar(name=tr(name), orientation="h", base=bar["base"], x=bar["x"], y=bar["y"],
                    text=bar["text"], textposition="none", customdata=bar["end"],
                    marker_color=COLOURS.get(name, spare.get(name)),
                    hovertemplate="%{text}<br>%{base:.2f} – %{customdata:.2f} ms"
                                  "<extra>%{fullData.name}</extra>")
    fig.update_layout(**{**LAYOUT, "height": max(LAYOUT["height"], 60 * len(lanes) + 140)},
                      barmode="overlay",
                      title=title or tr("What each rank did, steps {steps}, on one clock",
                                        steps=", ".join(map(str, chosen))))
    fig.update_xaxes(title_text=tr("milliseconds from the first span drawn"))
    fig.update_yaxes(categoryorder="array", categoryarray=list(lanes.values()))
    return fig
