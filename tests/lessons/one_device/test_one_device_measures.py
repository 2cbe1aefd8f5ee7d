"""Lesson 01b's measurements of the package's own code (``gpututor.lessons.one_device.measures``):
the tiled attention's matmul FLOPs against the naive one's, counted, match what its loops do
(it skips the tiles the causal mask hides; its backward has 5 matmuls a tile against 4); and
the weights' distance is the one ``tests/precision/test_adam8bit.py`` measures."""
import inspect

import pytest
import torch

from gpututor import RunSpec, build_model
from gpututor.measure.attention_cost import attention_costs
from gpututor.lessons.one_device.measures import attention_flops, weights_apart


@pytest.mark.parametrize("seq_len", [64, 128, 256, 1024])
def test_the_counted_flops_are_the_tiles_the_code_computes(seq_len):
    flops = attention_flops(seq_len, heads=2, head_dim=16)
    n = seq_len // 64
    assert flops["tiles"] == {"all": n * n, "computed": n * (n + 1) // 2}
    kept = (n + 1) / (2 * n)                  # the share of tiles computed
    tiled, naive = flops["tiled"], flops["naive"]
    assert tiled["forward"] / naive["forward"] == pytest.approx(kept)
    assert tiled["backward"] / naive["backward"] == pytest.approx(kept * 5 / 4)
    assert tiled["total"] / naive["total"] == pytest.approx(kept * 7 / 6)


def test_the_issue_numbers_more_flops_at_one_tile_fewer_at_many():
    """1.17x at T = 64 (one tile, backward recomputes), 0.62x at T = 1024 (issue 42)."""
    ratio = lambda T: attention_flops(T)["tiled"]["total"] / attention_flops(T)["naive"]["total"]
    assert ratio(64) == pytest.approx(7 / 6) and ratio(1024) == pytest.approx(0.62, abs=0.005)


def test_the_flops_are_counted_where_section_1_measures_bytes_and_time():
    counted = inspect.signature(attention_flops).parameters
    measured = inspect.signature(attention_costs).parameters
    for name in ("batch", "heads", "head_dim", "block"):
        assert counted[name].default == measured[name].default, name


def test_weights_apart_is_zero_for_the_same_weights_and_one_for_the_start():
    spec = RunSpec(model="gpt", model_size="tiny", world_size=1)
    start, moved = build_model(spec), build_model(spec)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(0.01)
    assert weights_apart(moved, moved, spec) == pytest.approx({"apart": 0.0, "cosine": 1.0})
    assert weights_apart(start, moved, spec)["apart"] == pytest.approx(1.0)
