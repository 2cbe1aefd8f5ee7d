"""With several micro-batches per step, what can hide the data-parallel traffic depends on how
each layout accumulates (DDP's ``no_sync``, ZeRO-2's per-micro-batch reduce-scatter, ZeRO-3's
gathers in every micro-batch): the planner's step time must follow it."""
import pytest

from gpututor import catalog
from gpututor.plan.memory import PRESETS
from gpututor.plan.time import step_time

MODEL = next(iter(PRESETS.values()))
H100 = catalog.get_gpu("H100-80GB")
SLOW = catalog.Link("test-slow-link", 20e9, 10e-6, "test")   # 20 GB/s, not in the catalogue
PEAK = H100.peak("bf16")


def step(zero_stage, micro_batches, dp=8):
    tokens = dp * micro_batches * 4 * MODEL.seq_len      # micro-batches of 4 sequences per GPU
    return step_time(MODEL, tokens, dp, PEAK, dp=dp, zero_stage=zero_stage, micro_batch=4,
                     dp_link=SLOW)


def test_one_micro_batch_hides_behind_the_whole_backward():
    for stage in (0, 1, 2):
        one = step(stage, 1)
        assert one["microbatches"] == 1
        assert one["dp_exposed_s"] == pytest.approx(max(0.0, one["dp_comm_s"]
                                                         - one["compute_s"] * 2 / 3))


@pytest.mark.parametrize("stage", [0, 1])
def test_accumulating_whole_gradients_reduces_once_behind_the_last_backward_only(stage):
    s = step(stage, 8)
    assert s["dp_comm_s"] == pytest.approx(step(stage, 1)["dp_comm_s"])   # once per step
    last_backward = s["compute_s"] / 8 * 2 / 3
    assert s["dp_exposed_s"] == pytest.approx(max(0.0, s["dp_comm_s"] - last_backward))
    assert s["dp_exposed_s"] > 0          # the whole step's backward would have hidden it
    assert s["dp_comm_s"] < s["compute_s"] * 2 / 3


def test_zero2_reduce_scatters_every_micro_batch_and_zero3_gathers_in_every_one():
    one_allreduce = step(0, 8)["dp_comm_s"]
    z2, z3 = step(2, 8), step(3, 8)
    assert z2["dp_comm_s"] == pytest.approx(one_allreduce * (8 + 1) / 2)
    assert z2["dp_exposed_s"] == pytest.approx(max(0.0, z2["dp_comm_s"]
                                                   - z2["compute_s"] * 2 / 3))
    assert z3["dp_comm_s"] == pytest.approx(one_allreduce * 1.5 * 8)
    assert z3["dp_exposed_s"] == pytest.approx(max(0.0, z3["dp_comm_s"] - z3["compute_s"]))
    assert step(3, 1)["dp_comm_s"] == pytest.approx(step(0, 1)["dp_comm_s"] * 1.5)
