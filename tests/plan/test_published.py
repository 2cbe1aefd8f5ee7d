"""The planner against published runs: Llama 2's GPU-hours (Touvron et al. 2023, Table 2) within
the range lesson 08 states, and torchtitan's Llama 3.1 8B throughput with its implied MFU."""
import pytest

from gpututor.plan.published import LLAMA2_RATIO_RANGE, RUNS, compare, implied_mfu

LLAMA2 = {"Llama 2 7B": 184_320, "Llama 2 13B": 368_640, "Llama 2 70B": 1_720_320}


def test_the_published_figures_are_the_sources():
    figures = {run.name: run.published for run in RUNS}
    assert {k: figures[k] for k in LLAMA2} == LLAMA2
    assert figures["torchtitan Llama 3.1 8B"] == 5762


@pytest.mark.parametrize("name", LLAMA2)
def test_llama2_gpu_hours_are_predicted_within_the_range_the_lesson_states(name):
    row = compare(next(run for run in RUNS if run.name == name))
    low, high = LLAMA2_RATIO_RANGE
    assert row["fits"] is True
    assert low <= row["ratio"] <= high, row


def test_implied_mfu_is_the_model_flops_over_gpu_time_and_peak():
    run = next(run for run in RUNS if run.name == "Llama 2 7B")
    # 6N + 6·L·s·h per token (causal), 2T tokens, 184,320 h at 312 TFLOP/s
    per_token = 6 * 6.74e9 + 6 * 32 * 4096 * 4096
    assert implied_mfu(run) == pytest.approx(per_token * 2e12 / (184_320 * 3600 * 312e12))
    titan = next(run for run in RUNS if run.measure == "tokens/s/GPU")
    # torchtitan counts the whole square and reports 33-39 % MFU for this 8B on H100s
    assert 0.33 <= implied_mfu(titan, causal=False) <= 0.39


def test_torchtitans_run_is_compared_on_its_own_layout():
    row = compare(next(run for run in RUNS if run.measure == "tokens/s/GPU"))
    assert "dp 8 ZeRO-3" in row["layout"] and "selective" in row["layout"]
    assert row["predicted"] > 0 and row["ratio"] == pytest.approx(row["predicted"] / 5762)


def test_torchtitans_memory_is_counted_with_its_fused_attention():
    """torchtitan's SDPA flash kernel keeps no s×s scores: its memory is plan.memory's
    attention="fused" count, and estimate() without ``attention`` still plans eager attention."""
    from gpututor.catalog import GB
    from gpututor.plan.memory import per_device_memory
    from gpututor.plan.recommend import estimate

    titan = next(run for run in RUNS if run.measure == "tokens/s/GPU")
    config = titan.config
    fused, eager = (per_device_memory(titan.model, config.micro_batch, 3, config.dp,
                                      recompute="selective", attention=kind)["total"]
                    for kind in ("fused", "eager"))
    # eager selective holds one recomputed layer's scores: 5·a·s²·b bytes
    assert eager - fused == pytest.approx(5 * 32 * 8192 ** 2 * 2)
    assert compare(titan)["predicted_memory_gb"] == pytest.approx(fused / GB)
    assert estimate(titan.model, 1e9, config).memory["total"] == pytest.approx(eager)
