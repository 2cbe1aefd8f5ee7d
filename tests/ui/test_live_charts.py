"""Lesson 05's live Gantt chart and lesson 11's live expert load follow a run with the one
follower (``ui.follow.Follower.follow``): the first complete step drawn at once, then at most one
redraw per interval, and the last step drawn when the run ends."""
from __future__ import annotations

import IPython.display
import pytest

from gpututor import RunSpec, launch
from gpututor.lessons.mixture_of_experts import figures as moe
from gpututor.lessons.pipeline_parallel import figures as pipeline


@pytest.fixture
def no_display(monkeypatch):
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    return shown


def test_live_gantt_draws_the_first_step_at_once_and_ends_on_the_last(no_display, monkeypatch):
    drawn = []
    real = pipeline.gantt
    monkeypatch.setattr(pipeline, "gantt", lambda events, title, *a, **k: (
        drawn.append(title), real(events, title, *a, **k))[1])
    spec = RunSpec(model="gpt", model_size="tiny", strategy="pp", world_size=2, batch_size=8,
                   seq_len=16, steps=6, options=(("microbatches", 4),), timeout=60.0)
    summary = pipeline.live_gantt(launch(spec), every_s=3600)   # one interval: no redraw
    assert len(no_display) == 1 and summary["steps"] == 6
    # the first complete step at once, nothing in between (the interval never passed), the last
    assert drawn[0].startswith("Step ") and drawn[-1] == "Step 5 (last)" and len(drawn) == 2
    view = no_display[0]   # a LiveFigure (canvases), not a plotly FigureWidget
    assert view.charts[0]["kind"] == "spans" and view.charts[0]["title"].startswith("Step 5")
    assert {row for s in view.charts[0]["series"] for row in s["row"]} == {"stage 0", "stage 1"}


def test_live_expert_load_draws_the_first_step_at_once_and_ends_on_the_last(no_display,
                                                                           monkeypatch):
    drawn = []
    real = moe.expert_load_figure
    monkeypatch.setattr(moe, "expert_load_figure", lambda records, layer, fig: (
        drawn.append(len(records)), real(records, layer, fig))[1])
    spec = RunSpec(model="moe", model_size="tiny", strategy="ddp", world_size=2, batch_size=8,
                   seq_len=16, steps=5, timeout=60.0)
    summary = moe.live_expert_load(launch(spec), every_s=3600)
    assert summary["steps"] == 5
    assert drawn[0] >= 1 and drawn[-1] == 5 and len(drawn) == 2   # first step, then the end
    charts = no_display[0].charts      # three charts, no secondary axis: slots, ratio, MB sent
    assert [c["kind"] for c in charts] == ["bars", "lines", "lines"]
    assert len(charts[1]["series"][0]["y"]) == 5
