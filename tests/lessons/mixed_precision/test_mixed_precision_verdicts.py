"""Lesson 06's verdicts choose their words from the numbers they are given: one test per branch,
fed numbers (nothing is trained or launched), and the speed figure draws what it is given."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpututor.lessons.mixed_precision import verdicts as v
from gpututor.lessons.mixed_precision.figures import speed_figure, ticks_at


def test_numbers_are_written_readably():
    assert v.readable(65504.0) == "65,504" and v.readable(3.4028e38) == "3.4e+38"
    assert v.readable(6.1035e-05) == "6.1e-05" and v.readable(1.0) == "1"
    assert v.power_of_two(2**16) == "2¹⁶ = 65,536" and v.power_of_two(1) == "1"
    assert v.power_of_two(2**24) == "2²⁴ = 16,777,216" and v.power_of_two(1000) == "1,000"


def scale_row(scale, lost, overflow=0.0):
    return {"scale": scale, "lost_fp16": lost, "overflow_fp16": overflow, "lost_bf16": 0.0}


@pytest.mark.parametrize("rows,words,tone", [
    ([scale_row(1, 0.0), scale_row(2**16, 0.0)], "keeps every one", "mixed"),
    ([scale_row(1, 8.6e-4), scale_row(2**8, 6.3e-4), scale_row(2**16, 7.2e-5),
      scale_row(2**24, 0.0, 0.157)], "a scale of 2¹⁶ = 65,536 leaves 0.0072% zeroed", "good"),
    ([scale_row(1, 8.6e-4), scale_row(2**24, 0.0, 0.157)], "no scale tried", "bad"),
])
def test_the_scale_verdict(rows, words, tone):
    headline, _, got = v.scale_verdict(rows)
    assert words in headline and got == tone, headline
    assert "0.0860%" in headline or tone == "mixed"


def test_the_replay_verdict():
    same = [{"scale": 8.0, "skipped": False, "grad_scaler_scale": 8.0, "grad_scaler_skipped": False}] * 3
    assert v.replay_verdict(same)[0].endswith("at all 3 steps") and v.replay_verdict(same)[2] == "good"
    other = same[:1] + [{**same[0], "grad_scaler_scale": 4.0}] + same[:1]
    headline, _, tone = v.replay_verdict(other)
    assert "differently at step 1" in headline and tone == "bad"


def trainer(losses, overflowed=0, skipped=0, step_s=0.01):
    results = [SimpleNamespace(overflowed=i < overflowed, skipped=i < skipped) for i in range(len(losses))]
    return SimpleNamespace(losses=losses, results=results, steady_step_s=step_s)


@pytest.mark.parametrize("unscaled,scaled,overflowed,words,tone", [
    ([3.0, 2.95], [3.0, 2.9999], 0, "drifted further from fp32's loss than with one", "good"),
    ([3.0, 2.9999], [3.0, 2.95], 0, "scaling bought nothing measurable", "mixed"),
    ([3.0, 2.99], [3.0, 2.991], 0, "stayed about as close", "mixed"),
    ([3.0, float("nan")], [3.0, 2.99], 1, "met inf/nan gradients in 1 of 2 steps", "bad"),
])
def test_the_trainer_verdict(unscaled, scaled, overflowed, words, tone):
    runs = {"fp32": trainer([3.0, 3.0]), "bf16 master weights": trainer([3.0, 2.99]),
            "fp16 + loss scaling": trainer(scaled), "fp16, no scaling": trainer(unscaled, overflowed)}
    headline, details, got = v.trainer_verdict(runs)
    assert words in headline and got == tone, headline
    assert "fp16, no scaling" in details


def test_the_trainer_rows_say_not_measured_for_a_run_without_steady_steps():
    rows = v.trainer_rows({"fp32": trainer([3.0, 2.5]), "fp16, no scaling": trainer([3.0, 2.4], 1, 0, None)})
    assert rows[1][1:] == ["2.4000", "1.0e-01", "1", "0", "not measured"]
    held = v.held_rows({"master_weights": 400, "compute_copy": 200, "optimizer": 800}, 100)
    assert [r[2] for r in held] == ["4.00", "2.00", "8.00", "14.00"]


def summary(tokens, device="cpu", params=100.0, activations=1000.0, losses=(4.0, 3.0)):
    return {"tokens_per_s": tokens, "device": device, "losses": list(losses), "final_loss": losses[-1],
            "peak_mem_bytes": [2e6], "mem_by_category": {"params": [params], "grads": [params],
                                                         "optimizer": [2 * params],
                                                         "activations": [activations]}}


@pytest.mark.parametrize("fp32,bf16,words,tone", [
    (1000, 2040, "trained 2.04× as fast as fp32 on this CPU", "good"),
    (1000, 80, "trained slower than fp32 on this CPU: 0.08× its tokens/s", "bad"),
    (1000, 1050, "about as fast as fp32 on this CPU (1.05×", "mixed"),
    (1000, None, "no speed to compare", "mixed"),
])
def test_the_autocast_verdict(fp32, bf16, words, tone):
    headline, _, got = v.autocast_verdict(summary(fp32), summary(bf16))
    assert words in headline and got == tone, headline


def test_the_autocast_verdict_names_the_gpu_it_ran_on():
    assert "on this GPU" in v.autocast_verdict(summary(1000, "cuda:0"), summary(3000, "cuda:0"))[0]
    assert v.autocast_rows({"bf16": summary(None)})[0][1] == "not measured"


@pytest.mark.parametrize("bf16,words,tone", [
    (summary(1, activations=590.0), "cut the activations to 0.59×", "good"),
    (summary(1, activations=990.0), "about as much too (0.99×)", "mixed"),
    (summary(1, params=50.0), "changed what should stay in fp32: parameters, gradients, optimizer state",
     "bad"),
])
def test_the_memory_verdict(bf16, words, tone):
    headline, _, got = v.memory_verdict(summary(1), bf16)
    assert words in headline and got == tone, headline


def test_memory_not_measured_is_said_not_zeroed():
    unmeasured = summary(1)
    unmeasured["mem_by_category"]["activations"] = [None]
    assert "not measured" in v.memory_verdict(summary(1), unmeasured)[0]
    assert v.memory_rows(summary(1), unmeasured)[3][2:] == ["not measured", "not measured"]


H100 = 989.5 / 67


@pytest.mark.parametrize("bf16,features,words,tone", [
    (4.5, ["avx512_bf16", "amx_bf16"], "ran 4.50× as fast as fp32 (it lists bf16 instructions)", "good"),
    (0.08, [], "ran slower than fp32, 0.08× its rate (it lists no bf16 instructions): the reverse",
     "bad"),
    (0.08, ["avx512_fp16"], "(it lists no bf16 instructions)", "bad"),
    (1.02, None, "about as fast as fp32 (1.02×; this machine does not list", "mixed"),
])
def test_the_matmul_verdict(bf16, features, words, tone):
    headline, details, got = v.matmul_verdict({"fp32": 1.0e11, "bf16": bf16 * 1.0e11, "fp16": 1.0e10},
                                              features)
    assert words in headline and got == tone, headline
    assert f"H100-80GB's catalogue peaks give {H100:.1f}×" in headline or "reverse" in headline
    assert "not measured" in details and "fp16 10.0 GFLOP/s" in details


def test_the_catalogue_ratio_is_none_for_a_format_a_gpu_lacks():
    assert v.catalogue_ratios("V100-32GB")["bf16"] is None
    assert v.catalogue_ratios("H100-80GB")["bf16"] == pytest.approx(H100)


def test_the_speed_figure_draws_measured_and_expected_bars():
    fig = speed_figure({"fp32": 1e11, "bf16": 8e9, "fp16": 9e9}, summary(1000), summary(80))
    bf16, fp16 = fig.data
    assert list(bf16.customdata) == pytest.approx([0.08, 0.08, H100])
    assert fp16.customdata[1] is None and fp16.text[1] == ""        # no fp16 run: no bar, not 0
    assert "not measured" in bf16.x[2] and list(bf16.marker.pattern.shape) == ["", "", "/"]
    assert 1.0 in fig.layout.yaxis.tickvals and 14.8 in fig.layout.yaxis.tickvals


def test_log_ticks_leave_out_values_whose_labels_would_overlap():
    assert ticks_at([0.0814, 0.093, 14.77, 14.77, 1.05, 4.53]) == [0.093, 1.0, 4.53, 14.8]
