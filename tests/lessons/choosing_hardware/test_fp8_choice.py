"""Lesson 08's "With FP8": the A100 refused, the H100 and H200 planned in both precisions, the
words of the verdict chosen from the planner's numbers and torchtitan's published gain."""
import pytest

from gpututor.lessons.choosing_hardware import fp8_choice
from gpututor.lessons.choosing_hardware.fp8_choice import (fp8_plans, fp8_rows, fp8_step_speedup,
                                                           fp8_verdict)
from gpututor.plan.memory import PRESETS


@pytest.fixture(scope="module")
def plans():
    return fp8_plans(PRESETS["7b"], 140e9, max_gpus=64, deadline_days=30, budget=60_000)


def test_each_gpu_in_both_precisions_the_a100_refused_in_fp8(plans):
    assert list(plans) == [(g, p) for g in fp8_choice.FP8_GPUS for p in ("bf16", "fp8")]
    assert plans["A100-80GB", "fp8"] is None
    assert all(plans[g, p] is not None for g in ("H100-80GB", "H200-141GB") for p in ("bf16", "fp8"))
    assert plans["H100-80GB", "fp8"].precision == "fp8"
    _, rows = fp8_rows(plans)
    assert rows[1][:4] == ["A100-80GB", "fp8", "-", "refused: no FP8 units"]
    assert rows[3][2] == "1,979" and rows[2][2] == "990"


def test_the_verdict_compares_the_planners_gain_with_torchtitans(plans, monkeypatch):
    model = PRESETS["7b"]
    headline, details, tone = fp8_verdict(plans, model, 140e9)
    assert "A100-80GB: no FP8 units, so the planner refuses fp8 there" in headline
    gain = fp8_step_speedup(model, 140e9, plans["H100-80GB", "fp8"])
    assert 1.28 < gain < 2 and f"{gain:.2f}x (H100-80GB)" in details
    assert "8,532 against 6,667" in details and "1.28x" in details
    assert "above the gain torchtitan measured" in details
    monkeypatch.setattr(fp8_choice, "TORCHTITAN_FLOAT8_TPS", 6667 * 2)   # a gain above the planner's
    assert "no more than the gain torchtitan measured" in fp8_verdict(plans, model, 140e9)[1]
