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
    assert "step 0:" in details and "step 9:" in details
