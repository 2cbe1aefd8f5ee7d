"""Lesson 11's load verdict reads the records' numbers and chooses its words from them."""
from __future__ import annotations

import pytest

from gpututor.lessons.mixture_of_experts.load import imbalance, load_of, load_verdict


def record(step, kept, dropped):
    return {"step": step, "expert_tokens": [kept], "expert_dropped": [dropped]}


def test_the_load_of_a_step():
    got = load_of(record(0, [30, 10, 10, 10], [10, 0, 0, 0]))
    assert got["busiest"] == pytest.approx(imbalance([30, 10, 10, 10], [10, 0, 0, 0]))
    assert got["busiest"] == pytest.approx(40 / 17.5) and got["dropped"] == pytest.approx(10 / 70)


@pytest.mark.parametrize("last,words,tone", [
    ([40, 10, 5, 5], "grew less balanced", "bad"),
    ([15, 15, 15, 15], "grew more balanced", "good"),
    ([26, 12, 11, 11], "stayed about as balanced", "mixed"),
])
def test_the_verdict_follows_the_busiest_experts_change(last, words, tone):
    headline, details, got = load_verdict(record(0, [25, 12, 12, 11], [0] * 4),
                                          record(9, last, [0] * 4))
    assert words in headline and got == tone, headline
    assert "step 0, first layer" in details and "step 9, first layer" in details


def test_the_verdict_reads_the_first_layer_the_figure_draws():
    first = {"step": 0, "expert_tokens": [[15, 15, 15, 15], [40, 10, 5, 5]],
             "expert_dropped": [[0] * 4, [0] * 4]}
    last = {"step": 9, "expert_tokens": [[40, 10, 5, 5], [15, 15, 15, 15]],
            "expert_dropped": [[0] * 4, [0] * 4]}
    assert "grew less balanced" in load_verdict(first, last)[0]   # layer 0; layer 1 went the other way
