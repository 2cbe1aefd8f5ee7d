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


def test_flops_predict_a_small_step_difference_for_the_small_gpt():
    """Section 4's prediction: the attention core is about a fifth of a zig-zag rank's FLOPs at
    T = 256, so the ring's 1.33x becomes about 1.07x of the step."""
    from gpututor import RunSpec
    from gpututor.lessons.long_context.runs import expected_step_ratio
    spec = RunSpec(model="gpt", model_size="small", batch_size=8, device="cpu", seq_len=256,
                   strategy="cp", world_size=2)
    expected = expected_step_ratio(spec)
    assert expected["ratio"] == pytest.approx(1.074, abs=0.002)
    assert expected["attention_share"] == pytest.approx(0.223, abs=0.002)
    assert expected_step_ratio(spec, "zigzag", "zigzag")["ratio"] == 1.0


def test_computed_rectangles_give_the_codes_slowdown():
    """ring_forward computes visible_tile's rectangles: 1.33, 1.60, 1.78 contiguous, 1.00 zig-zag."""
    for n, expected in ((2, 4 / 3), (4, 1.6), (8, 16 / 9)):
        assert ring_slowdown(256, n, "contiguous", counted="computed") == pytest.approx(expected)
        assert ring_slowdown(256, n, "zigzag", counted="computed") == pytest.approx(1.0)
