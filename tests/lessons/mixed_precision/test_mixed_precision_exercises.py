"""Lesson 06's checkers (``gpututor.lessons.mixed_precision.exercises``): the published solution of
every exercise passes, plausible wrong answers fail, each named by its mistake, and the loss
scaler's rule cannot be passed by running GradScaler, the package's scaler or a memorised list."""
import math
import re

import numpy as np
import pytest
import torch

from gpututor import RunSpec
from gpututor.i18n import set_language
from gpututor.lessons.mixed_precision.exercises import (STREAMS, check_fp16_trainer_bytes,
                                                  check_flush_threshold, check_loss_scaler,
                                                  grad_scaler_scales)
from gpututor.precision import DynamicLossScaler, replay_scalers
from exercise_solutions import published as _published, rejected

STREAM = [1.0, 1.0, math.inf, 1.0, 1.0, 1.0, 1.0, math.nan, math.inf, 1.0, 1.0, 1.0]   # lesson 06's


def published(stem: str, variable: str, **names):
    return _published(stem, variable, **names)


TINY = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1,
               batch_size=16, seq_len=32, steps=15)   # lesson 06's `tiny`
SPEC = RunSpec(model="gpt", model_size="small", strategy="single", world_size=1,
               batch_size=32, seq_len=64, steps=12, device="cpu")   # lesson 06's `spec`


# ---- exercise 1: the update rule -----------------------------------------------------------------

def never_backs_off(scale, clean_steps, found_inf, growth_interval):
    clean_steps += 1
    return (scale * 2.0, 0) if clean_steps == growth_interval else (scale, clean_steps)


def grows_one_step_late(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, 0
    if clean_steps == growth_interval:   # checks before counting
        return scale * 2.0, 0
    return scale, clean_steps + 1


def keeps_counting_after_an_overflow(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, clean_steps  # forgot to reset the count
    clean_steps += 1
    return (scale * 2.0, 0) if clean_steps == growth_interval else (scale, clean_steps)


def interval_of_three(scale, clean_steps, found_inf, growth_interval):
    if found_inf:                        # right for the lesson's stream only: ignores the argument
        return scale * 0.5, 0
    clean_steps += 1
    return (scale * 2.0, 0) if clean_steps == 3 else (scale, clean_steps)


def test_the_published_rule_passes_and_a_tensor_or_numpy_scale_too(capsys):
    check_loss_scaler(published("06_mixed_precision", "my_update"), STREAM)
    assert "Correct: the same scale as GradScaler at every step of section 3's stream and of 3" \
        in capsys.readouterr().out

    def as_tensor(scale, clean_steps, found_inf, growth_interval):
        s, c = published("06_mixed_precision", "my_update")(float(scale), clean_steps, found_inf,
                                                            growth_interval)
        return torch.tensor(s), np.int64(c)
    check_loss_scaler(as_tensor, STREAM)


@pytest.mark.parametrize("rule, stream", [(never_backs_off, "section 3's stream"),
                                          (grows_one_step_late, "section 3's stream"),
                                          (keeps_counting_after_an_overflow, "section 3's stream"),
                                          (interval_of_three, "the checker's stream 1")])
def test_the_classic_mistakes_fail_and_the_message_says_where_not_the_scale(rule, stream):
    with pytest.raises(AssertionError, match=f"on {stream} .* your rule's scale is ") as failure:
        check_loss_scaler(rule, STREAM)
    message = str(failure.value)
    assert "too high" in message or "too low" in message
    # GradScaler's own scale at that step is not in the message
    step = int(message.split("after step ")[1].split()[0])
    stream_values = STREAM if stream.startswith("section") else STREAMS[0][2]
    start, interval = (2.0**10, 3) if stream.startswith("section") else STREAMS[0][:2]
    theirs = f"{grad_scaler_scales(stream_values, start, interval)[step]:g}"
    assert not re.search(rf"(?<![\d.]){re.escape(theirs)}(?![\d.])",
                         message.split("your rule's scale is")[1])


def test_a_memorised_list_of_the_printed_scales_fails():
    printed = iter(row["grad_scaler_scale"] for row in replay_scalers(STREAM, init_scale=2.0**10,
                                                                      growth_interval=3)[1:])
    with_last = iter(list(printed) + [grad_scaler_scales(STREAM, 2.0**10, 3)[-1]])

    def memorised(scale, clean_steps, found_inf, growth_interval):
        return next(with_last), 0
    rejected(check_loss_scaler, memorised, STREAM, match="on the checker's stream 1, your rule "
                                                         "failed at step 1: StopIteration")


def test_running_the_reference_is_refused_however_it_is_reached():
    from gpututor.precision.loss_scaling import DynamicLossScaler as imported_before

    def packaged(scale, clean_steps, found_inf, growth_interval):
        scaler = imported_before(init_scale=scale, growth_interval=growth_interval)
        scaler.clean_steps = clean_steps
        scaler.update(found_inf)
        return scaler.scale, scaler.clean_steps

    def grad_scaler(scale, clean_steps, found_inf, growth_interval):
        scaler = torch.amp.GradScaler("cpu", init_scale=scale, growth_interval=growth_interval)
        scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
        scaler._growth_tracker.fill_(clean_steps)
        scaler.update(new_scale=None)   # reaches GradScaler.update either way
        return scaler.get_scale(), int(scaler._growth_tracker)

    def kernel(scale, clean_steps, found_inf, growth_interval):
        s, tracker = torch.tensor([float(scale)]), torch.tensor([clean_steps], dtype=torch.int32)
        torch._amp_update_scale_(s, tracker, torch.tensor([float(found_inf)]), 2.0, 0.5,
                                 growth_interval)
        return s.item(), int(tracker)

    def aten_op(scale, clean_steps, found_inf, growth_interval):
        s, tracker = torch.tensor([float(scale)]), torch.tensor([clean_steps], dtype=torch.int32)
        torch.ops.aten._amp_update_scale_(s, tracker, torch.tensor([float(found_inf)]), 2.0, 0.5,
                                          growth_interval)
        return s.item(), int(tracker)

    def fsdp_scalers_rule(scale, clean_steps, found_inf, growth_interval):   # examiner's find
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
        s, tracker = torch.tensor([float(scale)]), torch.tensor([clean_steps], dtype=torch.int32)
        ShardedGradScaler._amp_update_scale_cpu_(ShardedGradScaler("cpu", growth_interval=
                                                                   growth_interval),
                                                 torch.tensor([float(found_inf)]))
        return s.item(), int(tracker)

    assert kernel(8.0, 0, False, 1) == (16.0, 0)   # outside the check the kernel is the rule
    for way in (packaged, grad_scaler, kernel, aten_op, fsdp_scalers_rule):
        rejected(check_loss_scaler, way, STREAM, match="your rule ran the package's scaler or "
                                                       "GradScaler's own update")
    # and all of them work again afterwards
    assert kernel(8.0, 0, False, 1) == (16.0, 0) and aten_op(8.0, 2, True, 3) == (4.0, 0)
    scaler = DynamicLossScaler(init_scale=4.0, growth_interval=1)
    scaler.update(False)
    assert scaler.scale == 8.0


def test_a_rule_that_returns_one_number_is_told_so(capsys):
    rejected(check_loss_scaler, lambda scale, clean, inf, interval: scale, STREAM,
             match=r"did not return a pair \(scale, clean_steps\)")
    check_loss_scaler(..., STREAM)
    assert "Not answered yet" in capsys.readouterr().out


# ---- exercise 2: what the fp16 trainer holds on the small GPT ----------------------------------------

def test_the_fp16_trainers_bytes_are_measured_and_the_classic_mistakes_fail(capsys):
    solution = published("06_mixed_precision", "my_fp16_bytes")
    check_fp16_trainer_bytes(solution, SPEC)
    assert "Correct" in capsys.readouterr().out
    count = lambda model: sum(p.numel() for p in model.parameters())
    for mistake in (lambda model: 14 * 257_664,           # the tiny GPT's count, pasted
                    lambda model: 12 * count(model),      # forgot the fp16 copy of the model
                    lambda model: 18 * count(model),      # as if fp32 gradients were kept
                    lambda model: 16 * count(model)):     # as if the scaler kept one per parameter
        rejected(check_fp16_trainer_bytes, mistake, SPEC, match="than the trainer holds")
    rejected(check_fp16_trainer_bytes, lambda model: "many", SPEC, match="did not return a number")

    def runs_the_trainer(model):
        from gpututor.precision import master_weights
        return sum(master_weights.train_master_weights(SPEC.replace(steps=1), "fp16").memory.values())
    rejected(check_fp16_trainer_bytes, runs_the_trainer, SPEC, match="ran the trainer")
    check_fp16_trainer_bytes(lambda model: torch.tensor(14 * count(model)), SPEC)
    check_fp16_trainer_bytes(..., SPEC)
    assert "not answered yet" in capsys.readouterr().out



def test_the_fp16_trainers_bytes_are_measured_after_a_step_that_was_taken(capsys, monkeypatch):
    """A starting scale that overflows skips the first steps (no AdamW state yet): the check
    goes on until a step is taken, so the published 14 bytes per parameter still pass."""
    from gpututor.lessons.mixed_precision import exercises
    monkeypatch.setattr(exercises, "DynamicLossScaler", lambda: DynamicLossScaler(init_scale=2.0**40))
    assert all(r.skipped for r in exercises.train_master_weights(
        SPEC.replace(model_size="tiny", steps=1, batch_size=2, seq_len=16), "fp16",
        exercises.DynamicLossScaler()).results)
    check_fp16_trainer_bytes(published("06_mixed_precision", "my_fp16_bytes"), SPEC)
    assert "Correct" in capsys.readouterr().out


# ---- exercise 3: the flush threshold --------------------------------------------------------------

def test_the_flush_threshold_is_half_the_subnormal_over_the_scale(capsys):
    check_flush_threshold(published("06_mixed_precision", "my_flush_threshold"))
    assert "(the formula gives 2.98e-11)" in capsys.readouterr().out
    for mistake in (2**-24 / 1000,   # the smallest subnormal itself, not the rounding point
                    2**-25,          # forgot the loss scale
                    2**-25 * 1000,   # multiplied by the scale
                    2**-14 / 1000,   # the smallest normal
                    2**-24 / 2**16): # the old exercise's answer: another scale
        rejected(check_flush_threshold, mistake, match="is not what the formula gives")


def test_the_threshold_is_where_fp16_really_flushes():
    s = 1000.0
    threshold = 2**-25 / s
    lost = lambda g: (torch.tensor(g, dtype=torch.float64) * s).to(torch.float16).item() == 0
    assert lost(threshold * 0.999) and not lost(threshold * 1.001)


def test_the_checkers_speak_chinese(capsys):
    set_language("zh")
    try:
        check_flush_threshold(2**-25 / 1000)
        check_loss_scaler(..., STREAM)
        assert "梯度在 fp16 中被冲刷为 0 的阈值" in capsys.readouterr().out
        with pytest.raises(AssertionError, match="损失缩放器：在第 3 节的那串梯度上.*(偏高|偏低)"):
            check_loss_scaler(grows_one_step_late, STREAM)
    finally:
        set_language("en")
