"""Lesson 05's reading of a pipeline run: the measured bubble split into theory, compute and
hand-offs, and the sentences whose words the numbers choose."""
from types import SimpleNamespace

import pytest

from gpututor import RunSpec
from gpututor.lessons.pipeline_parallel.bubble import bubble_parts, parts_sentence, sends_sentence


def gpipe_run(late: float) -> SimpleNamespace:
    """A 2-stage GPipe run of 5 steps, m=2, passes of 1 s, each hand-off ``late`` s: steps 3
    and 4 are steady (warm-up 2, the FLOP and memory probes at steps 1 and 2)."""
    spec = RunSpec(model="gpt", strategy="pp", world_size=2, batch_size=8, steps=5,
                   options=(("schedule", "gpipe"), ("microbatches", 2)))
    h = late
    events = {0: [["F", 0, 0, 1], ["F", 1, 1, 2], ["B", 0, 4 + 2 * h, 5 + 2 * h],
                  ["B", 1, 5 + 2 * h, 6 + 2 * h]],
              1: [["F", 0, 1 + h, 2 + h], ["F", 1, 2 + h, 3 + h], ["B", 0, 3 + h, 4 + h],
                  ["B", 1, 4 + h, 5 + h]]}
    end = 6 + 2 * h
    measured = 1 - 8 / (2 * end)
    records = [{"rank": r, "step": s, "probe": s == 2, "bubble_fraction": measured,
                "stage_events": events[r], "stage_event_stages": [r] * 4}
               for s in range(5) for r in (0, 1)]
    return SimpleNamespace(spec=spec, records=records)


def test_the_bubble_splits_into_theory_compute_and_handoffs():
    parts = bubble_parts(gpipe_run(late=0.5))
    assert parts["steps"] == 2 and parts["theory"] == pytest.approx(1 / 3)
    assert parts["free"] == pytest.approx(1 / 3) and parts["compute"] == pytest.approx(0)
    assert parts["handoff"] == pytest.approx(parts["measured"] - 1 / 3) and parts["handoff"] > 0.05
    assert "handing over added more" in parts_sentence("GPipe", parts)
    free = bubble_parts(gpipe_run(late=0.0))
    assert free["handoff"] == pytest.approx(0) and free["measured"] == pytest.approx(1 / 3)


def test_a_run_without_a_steady_step_has_no_parts():
    run = gpipe_run(late=0.0)
    run.records = [r for r in run.records if r["step"] < 3]
    with pytest.raises(ValueError, match="no steady step"):
        bubble_parts(run)


@pytest.mark.parametrize("waited,posted,torchs,words", [
    (0.30, 0.20, 0.25, "posting the sends closed the gap"),
    (0.30, 0.27, 0.20, "closed 30% of the gap"),
    (0.30, 0.31, 0.20, "did not close the gap"),
    (0.20, 0.19, 0.25, "no gap to close"),
])
def test_the_numbers_choose_what_posting_the_sends_did(waited, posted, torchs, words):
    assert words in sends_sentence(waited, posted, torchs)


@pytest.mark.parametrize("waited,posted,torchs,words", [
    (0.30, 0.20, 0.28, "within the step-to-step spread of these runs (0.050), so none to close"),
    (0.30, 0.27, 0.20, "no measurable effect"),
    (0.30, 0.20, 0.10, "closed 50% of the gap"),
])
def test_differences_within_the_runs_spread_are_not_told_apart(waited, posted, torchs, words):
    assert words in sends_sentence(waited, posted, torchs, noise=0.05)
