"""Lesson 09's planner figure: a layout not run has no measured bar (None, never 0), and each
predicted bar is labelled by the planner's own verdict."""
from gpututor.lessons.composing_parallelisms.figures import prediction_figure


def test_prediction_figure_shows_what_was_run_and_the_verdicts():
    rows = [{"layout": "ddp", "mesh": {"dp": 4}, "total": 30e6, "fits": False},
            {"layout": "fsdp", "mesh": {"dp": 4}, "total": 10e6, "fits": True}]
    fig = prediction_figure(rows, {"fsdp": {"peak_mem_bytes": [8e6, 9e6, 8e6, 8e6]}}, 20e6)
    predicted, measured = fig.data
    assert list(predicted.x) == ["ddp dp4", "fsdp dp4"]
    assert list(predicted.y) == [30.0, 10.0]
    assert list(predicted.text) == ["does not fit", "fits"]
    assert list(measured.y) == [None, 9.0]            # ddp not run: no bar; fsdp: its largest rank
    lines = sorted(shape.y0 for shape in fig.layout.shapes)
    assert lines == [16.0, 20.0]                      # the planner's 80 % and the capacity
