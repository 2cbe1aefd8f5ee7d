"""Lesson 05's verdicts choose their words from the numbers they are given: one test per branch,
fed numbers (nothing is launched)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpututor.lessons.pipeline_parallel import verdicts as v


def test_a_stage_row_says_what_the_stage_holds():
    first = SimpleNamespace(is_first=True, is_last=False, blocks={"0": None, "1": None})
    middle = SimpleNamespace(is_first=False, is_last=False, blocks={"2": None})
    last = SimpleNamespace(is_first=False, is_last=True, blocks={"3": None})
    assert v.stage_row(0, first, 441600) == ["0", "embeddings; blocks 0, 1", "441,600"]
    assert v.stage_row(1, middle, 10)[1] == "blocks 2"
    assert v.stage_row(2, last, 10)[1] == "blocks 3; final norm, head"


def run(losses, step_s=0.1):
    return {"losses": losses, "final_loss": losses[-1], "step_time_s": step_s}


def test_the_training_verdict_accepts_float_rounding_and_names_a_run_beyond_it():
    summaries = {"one process": run([3.0, 2.5]), "GPipe, m=4": run([3.0, 2.5 + 1e-6])}
    headline, _, tone = v.training_verdict(summaries, {"one process": 0.0, "GPipe, m=4": 5e-5})
    assert headline.startswith("All 1 pipeline runs gave one process's losses (within 1e-05)") and tone == "good"
    assert "final weights that differ from its by at most 5.0e-05" in headline
    summaries["naive schedule"] = run([3.0, 2.6])
    headline, _, tone = v.training_verdict(summaries, {"one process": 0.0, "GPipe, m=4": 5e-5,
                                                       "naive schedule": 0.1})
    assert headline.startswith("naive schedule: losses differ") and tone == "bad"
    rows = v.training_rows(summaries, {"one process": 0.0, "GPipe, m=4": 5e-5, "naive schedule": 0.1})
    assert rows[1] == ["GPipe, m=4", "2.50000", "4.0e-07", "5.0e-05", "100"]


@pytest.mark.parametrize("measured,words,tone", [
    ({1: 0.50, 2: 0.34, 4: 0.21, 8: 0.12}, "shrank as m grew, from 0.50 at m=1 to 0.12 at m=8 (theory: 0.50 to 0.11)",
     "good"),
    ({1: 0.506, 2: 0.262, 4: 0.248, 8: 0.321}, "fell from 0.51 at m=1 to 0.25 at m=4, then rose to 0.32 at m=8, "
                                               "where the theory says 0.11", "mixed"),
    ({1: 0.50, 2: 0.52, 4: 0.55, 8: 0.60}, "did not shrink with more micro-batches", "bad"),
    ({1: 0.50, 2: 0.26, 4: 0.30, 8: 0.24}, "fell from 0.50 at m=1 to 0.24 at m=8 (theory: 0.50 to 0.11), but not "
                                           "with every added micro-batch", "mixed"),
])
def test_the_sweep_verdict(measured, words, tone):
    headline, _, got = v.sweep_verdict(measured, stages=2)
    assert words in headline and got == tone, headline


@pytest.mark.parametrize("handoff,words", [
    (0.24e-3, "the shortest hand-off to stage 1 240 µs: small beside a forward (2%)"),
    (24e-6, "the shortest hand-off to stage 1 24 µs: small beside a forward (0%)"),   # a GPU's
    (4.0e-3, "even the shortest hand-off to stage 1 4.00 ms, 41% of a forward"),
    (None, "no hand-off was timed"),
])
def test_the_handoff_verdict(handoff, words):
    headline, details, _ = v.handoff_verdict(9.7e-3, handoff, "gloo messages")
    assert words in headline and details == "gloo messages", headline


def memory(*activations):
    return {"mem_by_category": {"activations": list(activations)}}


@pytest.mark.parametrize("one_f_one_b,words,tone", [
    (memory(19.8e6, 10.0e6), "on every stage: 0.25, 0.12 of GPipe's", "good"),
    (memory(19.8e6, 82.0e6), "only on stage 0 (0.25, 1.00 of GPipe's)", "mixed"),
    (memory(78.1e6, 82.0e6), "no less activation memory than GPipe on any stage", "bad"),
    (memory(None, 10.0e6), "not measured on every stage", "mixed"),
])
def test_the_activation_verdict(one_f_one_b, words, tone):
    gpipe = memory(78.1e6, 81.6e6)
    headline, _, got = v.activation_verdict(gpipe, one_f_one_b)
    assert words in headline and got == tone, headline
    assert v.activation_rows(gpipe, memory(None, 10.0e6))[0] == ["0", "78.1", "not measured", "not measured"]


def parts(measured, theory, compute, handoff, spread=0.01):
    return {"measured": measured, "theory": theory, "compute": compute, "handoff": handoff,
            "free": measured - handoff, "steps": 2, "spread": spread}


@pytest.mark.parametrize("split,words", [
    ({"GPipe, m=8": parts(0.419, 0.111, 0.045, 0.263), "1F1B, m=8": parts(0.321, 0.111, 0.011, 0.199)},
     "Handing over added more to the bubble than unequal compute in every run (+0.263, +0.199"),
    ({"GPipe, m=8": parts(0.2, 0.111, 0.08, 0.01)}, "Unequal and uneven compute added more"),
    ({"GPipe, m=8": parts(0.419, 0.111, 0.045, 0.263), "1F1B, m=8": parts(0.2, 0.111, 0.08, 0.01)},
     "Handing over added more to the bubble in GPipe, m=8; unequal and uneven compute in 1F1B, m=8"),
    ({"pp-torch ZBV, m=4": parts(0.4, None, None, 0.1)}, "no theory to split"),
])
def test_the_parts_verdict(split, words):
    assert words in v.parts_verdict(split)[0]


def test_the_parts_table_says_no_theory_for_the_zero_bubble_schedules():
    columns, rows = v.parts_table({"pp-torch ZBV, m=4": parts(0.4, None, None, 0.1)})
    assert len(columns) == len(rows[0]) == 6
    assert rows[0][2:5] == ["no theory", "no theory", "+0.100"]
    assert v.schedule_rows({"x": parts(0.4, None, None, 0.1)}, {"x": {"step_time_s": 0.189}}) == \
        [["x", "no theory", "0.400", "189"]]


def test_the_implementations_verdict_words_each_schedule_by_its_numbers():
    pairs = {"GPipe": ({"step_time_s": 0.164}, {"step_time_s": 0.131}),
             "1F1B": ({"step_time_s": 0.134}, {"step_time_s": 0.137}),
             "ZB": ({"step_time_s": 0.100}, {"step_time_s": 0.150})}
    headline, details, _ = v.implementations_verdict(pairs)
    assert "GPipe faster (131 against 164 ms)" in headline
    assert "1F1B about as fast (137 against 134 ms)" in headline and "ZB slower" in headline
    assert "one after another" in details


def test_the_traffic_verdict():
    assert "would move 8× the bytes the 2-stage pipeline sends forward and back" in \
        v.traffic_verdict(2 * 1.05e6, 16.78e6)[0]
    assert "no more than" in v.traffic_verdict(1.0e6, 0.5e6)[0]


@pytest.mark.parametrize("interleaved,words,tone", [
    ({"from scratch": 0.25, "pp-torch": 0.2}, "Interleaving shrank the measured bubble, as the theory says", "good"),
    ({"from scratch": 0.472, "pp-torch": 0.531}, "grew the measured bubble here, against the theory (0.20 → 0.11)",
     "bad"),
    ({"from scratch": 0.36, "pp-torch": 0.2}, "did not shrink the measured bubble in every implementation (theory "
                                              "0.20 → 0.11; the runs' step-to-step spread 0.020): from scratch 0.35 → "
                                              "0.36, within the spread; pp-torch 0.29 → 0.20, shrank", "mixed"),
])
def test_the_interleaved_verdict(interleaved, words, tone):
    headline, _, got = v.interleaved_verdict({"from scratch": 0.352, "pp-torch": 0.293}, interleaved, noise=0.02)
    assert words in headline and got == tone, headline
    assert "from scratch 0.35 →" in headline


def test_the_sends_verdict_starts_with_a_capital_and_says_what_posting_did():
    headline, details, tone = v.sends_verdict(parts(0.30, 0.1, 0, 0.2), parts(0.20, 0.1, 0, 0.1),
                                              parts(0.25, 0.1, 0, 0.15), words="gloo: one handle per message")
    assert headline.startswith("From scratch 0.300") and "closed the gap" in headline and tone == "good"
    assert details == "gloo: one handle per message"
    headline, _, tone = v.sends_verdict(parts(0.472, 0.1, 0, 0.3), parts(0.478, 0.1, 0, 0.3),
                                        parts(0.531, 0.1, 0, 0.3), words="")
    assert "no gap to close" in headline and tone == "mixed"
    noisy = dict(spread=0.2)   # closed on paper, but within the runs' spread: not called closed
    headline, _, tone = v.sends_verdict({**parts(0.30, 0.1, 0, 0.2), **noisy}, parts(0.20, 0.1, 0, 0.1),
                                        parts(0.25, 0.1, 0, 0.15), words="")
    assert "within the step-to-step spread" in headline and tone == "mixed"
