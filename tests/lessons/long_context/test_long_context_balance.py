"""Lesson 10, section 3: the ring's slowdown from an unbalanced split is the busiest rank's work
over the *mean* rank's, step by step (what a synchronous ring waits for), not over the idlest's."""

import pytest

from gpututor.lessons.long_context.figures import positions_figure
from gpututor.parallel.context_parallel import (causal_work, ring_slowdown, ring_step_work,
                                                split_positions)


@pytest.mark.parametrize("n, expected", [(2, 1.50), (4, 1.75), (8, 1.87)])
def test_the_contiguous_ring_is_slower_by_busiest_over_mean(n, expected):
    work = causal_work(256, n, "contiguous")
    assert ring_slowdown(256, n, "contiguous") == pytest.approx(max(work) / (sum(work) / n))
    assert ring_slowdown(256, n, "contiguous") == pytest.approx(expected, abs=0.005)
    assert max(work) / min(work) > 2.9   # the ratio the lesson no longer prints as the slowdown


@pytest.mark.parametrize("n", (2, 4, 8))
def test_zigzag_balances_every_ring_step(n):
    assert ring_slowdown(256, n, "zigzag") == pytest.approx(1.0)
    steps = ring_step_work(256, n, "zigzag")
    assert steps.amax(dim=1).sum() * n == steps.sum()


def test_the_positions_figure_names_each_positions_rank():
    fig = positions_figure({s: split_positions(16, 2, s) for s in ("contiguous", "zigzag")})
    contiguous, zigzag = fig.data[0].z
    assert list(contiguous) == [0] * 8 + [1] * 8
    assert list(zigzag) == [0] * 4 + [1] * 8 + [0] * 4
