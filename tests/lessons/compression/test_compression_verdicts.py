"""Lesson 07's verdicts choose their words from the numbers they are given: one test per branch,
fed numbers (nothing is trained or launched), and the trade-off figure keeps its labels inside."""
from __future__ import annotations

import pytest
import torch

from gpututor.compression import quantize
from gpututor.lessons.compression import verdicts as v
from gpututor.lessons.compression.figures import tradeoff_figure


@pytest.mark.parametrize("losses,words,tone", [
    ([4.57, 3.0, 2.29], "The teacher trained: its loss fell from 4.57 to 2.29 in 3 steps", "good"),
    ([4.57, 4.5, 4.4], "barely fell (4.57 to 4.40 in 3 steps)", "bad"),
])
def test_the_teacher_verdict(losses, words, tone):
    headline, details, got = v.teacher_verdict({"losses": losses, "tokens_per_s": None}, 2.363, 257664,
                                               1_040_000)
    assert words in headline and got == tone, headline
    assert "257,664 parameters, 1.04 MB" in details and "not measured" in details


def test_the_rounding_verdict_and_rows():
    w = torch.nn.Parameter(torch.tensor([[0.1275, -0.0046, 0.0447], [0.5, 0.25, -0.5]]))
    q, scale = quantize.quantize_per_channel(w)
    back = quantize.dequantize_per_channel(q, scale)
    rows = v.rounding_rows(w, q, scale, back, n=3)
    assert rows[0][:2] == ["0.1275", "127"] and rows[1][1] == "-5"
    headline, details, tone = v.rounding_verdict(quantize.quantization_error(w), scale[0].item(), 0.1275)
    assert "within the bound of half a step" in headline and tone == "good"
    assert "0.1275 / 127" in details
    headline, _, tone = v.rounding_verdict({"max_error_in_scales": 0.9, "max_abs_error": 0.1,
                                            "relative_error": 0.1}, 0.001, 0.127)
    assert "more than the bound" in headline and tone == "bad"


SIZED = [{"variant": "fp32 teacher", "bytes": 1.04e6, "loss": 2.3633},
         {"variant": "int8 from scratch", "bytes": 0.40e6, "loss": 2.3635},
         {"variant": "int8 dynamic (torch.ao)", "bytes": 0.38e6, "loss": 2.3626}]
BOUND = {"linear_share": 0.86, "bound": 0.355}


def test_the_quantized_verdict_when_the_loss_barely_moves():
    headline, details, tone = v.quantized_verdict(SIZED, BOUND)
    assert "to 0.38x-0.38x" not in headline and "0.37x-0.38x the fp32 one" in headline, headline
    assert "at best 0.35x" in headline and "by 0.0007 at most" in headline and tone == "good"
    assert "86%" in details
    assert v.quantized_rows(SIZED)[1] == ["int8 from scratch", "0.40", "0.38x", "2.3635", "+0.0002"]


def test_the_quantized_verdict_when_the_loss_moves_by_more_than_a_percent():
    sized = SIZED[:2] + [{**SIZED[2], "loss": 2.45}]
    headline, _, tone = v.quantized_verdict(sized, BOUND)
    assert "int8 dynamic (torch.ao) moved the validation loss by +0.0867, 3.7% of it" in headline
    assert tone == "mixed"
    one = v.quantized_verdict(SIZED[:2], BOUND)[0]
    assert "to 0.38x the fp32 one" in one


def test_the_pruning_choice_verdict():
    assert v.same_choice_verdict({"differ": 0, "pruned_scratch": 110592})[2] == "good"
    headline, _, tone = v.same_choice_verdict({"differ": 3, "pruned_scratch": 110592})
    assert "disagree on 3 weights (110,592 chosen from scratch)" in headline and tone == "bad"


@pytest.mark.parametrize("after,words,tone", [
    ({0.5: 2.312, 0.9: 2.330}, "every pruned model (50%, 90% of the weights) came within 0.02", "good"),
    ({0.5: 2.312, 0.9: 2.695}, "50% pruned came within 0.02 of the unpruned model's 2.319; "
                               "90% (+0.376) stayed behind", "mixed"),
    ({0.5: 2.5, 0.9: 2.695}, "every pruned model stayed behind the unpruned one's 2.319: 50% (+0.181), "
                             "90% (+0.376)", "bad"),
])
def test_the_finetune_verdict(after, words, tone):
    headline, _, got = v.finetune_verdict(after, 2.319, 30)
    assert words in headline and got == tone, headline


def test_the_finetune_rows_name_the_unpruned_model():
    rows = v.finetune_rows({0.5: (0.5, 2.412, 2.312), 0.0: (0.0, 2.363, 2.319)}, 30)
    assert rows == [["50%", "50.00%", "2.412", "2.312"], ["unpruned", "0.00%", "2.363", "2.319"]]


def test_the_sparse_verdict():
    timing = [{"sparsity": s, "dense": 1.0, "sparse_csr": 2.0 - 2 * s} for s in (0.0, 0.5, 0.8, 0.9)]
    assert "only with 80%, 90% of the weights pruned" in v.sparse_verdict(timing)[0]
    slow = [{"sparsity": 0.9, "dense": 1.0, "sparse_csr": 1.5}]
    assert "slower than the dense kernel at every sparsity" in v.sparse_verdict(slow)[0]


@pytest.mark.parametrize("after,words,tone", [
    (2.329, "within 0.02 of the unpruned model's 2.319", "good"),
    (2.419, "0.100 behind the unpruned model's 2.319", "mixed"),
])
def test_the_neurons_verdict(after, words, tone):
    headline, details, got = v.neurons_verdict((384, 192), (257664, 183552), 2.418, after, 2.319, 30)
    assert "MLP width 384 -> 192 cut the parameters from 257,664 to 183,552" in headline
    assert words in headline and got == tone, headline
    assert "2.418 before fine-tuning" in details


@pytest.mark.parametrize("distilled,words,tone", [
    (2.554, "scored 2.554 on held-out text, 0.048 below the student trained alone (2.602)", "good"),
    (2.650, "0.048 worse than the student trained alone", "bad"),
    (2.600, "scored about the same on held-out text (2.600 and 2.602)", "mixed"),
])
def test_the_students_verdict(distilled, words, tone):
    headline, details, got = v.students_verdict(2.602, distilled)
    assert words in headline and got == tone, headline
    assert "One seed each" in details


def latency_rows(pruned_latency, pruned_bytes=1.04e6):
    return [{"variant": "fp32 teacher", "latency_s": 1.04, "bytes": 1.04e6},
            {"variant": "unpruned + 5 steps", "latency_s": 1.00, "bytes": 1.04e6},
            {"variant": "50% weights pruned + 5 steps", "latency_s": pruned_latency, "bytes": pruned_bytes},
            {"variant": "int8", "latency_s": 2.0, "bytes": 0.4e6}]


@pytest.mark.parametrize("latency,size,words", [
    (1.02, 1.04e6, "changed neither the file (1.000x the unpruned one's: zeros are stored like any "
                   "other number) nor the latency beyond the noise (1.02x)"),
    (0.80, 1.04e6, "left the file as large (1.000x: zeros are stored like any other number) but moved "
                   "the latency beyond the noise for 50% weights pruned + 5 steps (0.80x)"),
    (1.02, 0.5e6, "changed the file (0.481x the unpruned one's) but not the latency"),
    (0.80, 0.5e6, "changed the file (0.481x the unpruned one's) and, beyond the noise, the latency of "
                  "50% weights pruned + 5 steps (0.80x)"),
])
def test_the_pruned_verdict(latency, size, words):
    headline, details, tone = v.pruned_verdict(latency_rows(latency, size), "unpruned + 5 steps")
    assert words in headline and tone == "mixed", headline
    assert "the noise of this measurement (4.0%" in details


def test_the_tradeoff_figure_draws_the_loss_as_dots_labelled_on_the_side_with_room():
    rows = [{"variant": "fp32 teacher", "bytes": 1.04e6, "latency_s": 2.2e-3, "loss": 2.363},
            {"variant": "90% weights pruned + 30 steps", "bytes": 1.04e6, "latency_s": 2.2e-3, "loss": 2.695},
            {"variant": "student alone", "bytes": 0.3e6, "latency_s": 0.8e-3, "loss": 2.602}]
    fig = tradeoff_figure(rows)
    loss = fig.data[2]
    assert loss.type == "scatter" and loss.mode == "markers+text"
    where = dict(zip(loss.y, loss.textposition))
    assert where["fp32 teacher"] == "middle right" and where["90% weights pruned + 30 steps"] == "middle left"
    low, high = fig.layout.xaxis3.range
    assert low < 2.363 and high > 2.695
    assert len({trace.marker.color for trace in fig.data}) == 3   # one colour per panel, set


def test_the_pruned_verdict_chooses_its_branch_from_numbers_in_every_language():
    from gpututor.i18n import set_language
    set_language("zh")
    try:
        headline, details, _ = v.pruned_verdict(latency_rows(1.02), "unpruned + 5 steps")
    finally:
        set_language("en")
    assert "也没有让延迟的变化超出噪声" in headline, headline   # within the noise, as in English
    assert "没有可测出的变化" in details


def test_the_int8_latency_verdict_words_each_variant_against_the_noise():
    rows = [{"variant": "fp32 teacher", "latency_s": 2.2},
            {"variant": "int8 from scratch", "latency_s": 2.6},
            {"variant": "int8 dynamic (torch.ao)", "latency_s": 2.0},
            {"variant": "int8 weight-only (torchao)", "latency_s": 2.25},
            {"variant": "unpruned + 30 steps", "latency_s": 2.1}]        # 4.5 % from the teacher: noise
    headline, details, tone = v.int8_latency_verdict(rows, "unpruned + 30 steps")
    assert "int8 from scratch 1.18x, slower" in headline and "int8 dynamic (torch.ao) 0.91x, faster" in headline
    assert "int8 weight-only (torchao) 1.02x, within the noise" in headline and tone == "mixed"
    assert "at least 4.5%" in details
