"""Lesson 00's verdicts choose their words and tone from the measured speedups, in every branch."""
from __future__ import annotations

import pytest

from gpututor.lessons.start_here.contention import panel_verdict, speedup_verdict, speedups


def quiet(ddp, pair, one=100.0, world=2):
    return {"ddp": {"tokens_per_s": ddp * one, "world_size": world},
            "one": {"tokens_per_s": one}, "pair": {"tokens_per_s": pair * one}}


@pytest.mark.parametrize("ddp,pair,words,tone", [
    (2.3, 2.2, "at or above the ideal 2×", "good"),
    (1.69, 2.04, "what DDP adds", "good"),                 # 85 %: the pair reached more
    (1.6, 1.62, "communication cost at most about 5 %", "good"),
    (1.3, 1.4, "there without any communication", "mixed"),
    (1.3, 1.9, "what DDP adds", "mixed"),
    (1.05, 1.8, "about as fast as one", "bad"),
    (0.5, 1.2, "slower than one", "bad"),
])
def test_the_speedup_verdict_says_what_the_numbers_show(ddp, pair, words, tone):
    headline, got = speedup_verdict(quiet(ddp, pair), panel_speedup=None)
    assert words in headline and got == tone, headline
    assert headline.startswith("Without a live view")
    assert f"{ddp:.2f}×" in headline


def test_a_run_without_a_steady_step_has_no_verdict_and_no_bar():
    runs = quiet(1.5, 1.8)
    runs["one"]["tokens_per_s"] = None
    assert "no speedup to report" in speedup_verdict(runs, None)[0]
    assert speedups(runs, None)["DDP, no live view"] is None


@pytest.mark.parametrize("speedup,words,tone", [
    (2.1, "at or above the ideal", "good"), (1.6, "1.60×", "good"), (1.3, "1.30×", "mixed"),
    (0.89, "0.89×", "bad"), (None, "no speedup to report", "mixed")])
def test_the_panel_verdict(speedup, words, tone):
    headline, got = panel_verdict(speedup, 2)
    assert words in headline and got == tone, headline
