"""Lesson 06's checkers (``gpututor.lessons.mixed_precision.exercises``): the published solution of
every exercise passes, plausible wrong answers fail, each named by its mistake, and the loss
scaler's rule cannot be passed by running GradScaler, the package's scaler or a memorised list."""
import math
import random
import re

import numpy as np
import pytest
import torch

from gpututor import RunSpec
from gpututor.i18n import set_language
from gpututor.lessons.mixed_precision.exercises import (HELD_CASES, PRINTED, STREAMS, check_flush_threshold,
                                                  check_held_bytes, check_loss_scaler,
                                                  drawn_held_cases, grad_scaler_scales)
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


# ---- exercise 2: what a master-weights trainer holds, for layouts the lesson does not print --------

def count(model):
    return sum(p.numel() for p in model.parameters())


def the_printed_figure(model, dtype, optimizer):    # section 4's 14 bytes per parameter, pasted
    return 14 * count(model)


def no_copy_in_fp32(model, dtype, optimizer):       # as if an fp32 "copy" were the master itself
    copy = {"fp32": 0, "bf16": 2, "fp16": 2}[dtype]
    return (4 + copy + {"adamw": 8, "sgd": 4}[optimizer]) * count(model)


def sgd_as_adamw(model, dtype, optimizer):          # two moments whatever the optimizer
    return (4 + {"fp32": 4, "bf16": 2, "fp16": 2}[dtype] + 8) * count(model)


def with_gradients(model, dtype, optimizer):        # the fp32 gradients, freed after the step
    return (8 + {"fp32": 4, "bf16": 2, "fp16": 2}[dtype] + {"adamw": 8, "sgd": 4}[optimizer]) * count(model)


def sixteen_bit_as_four(model, dtype, optimizer):   # every copy 4 bytes
    return (8 + {"adamw": 8, "sgd": 4}[optimizer]) * count(model)


@pytest.mark.parametrize("mistake", [the_printed_figure, no_copy_in_fp32, sgd_as_adamw,
                                     with_gradients, sixteen_bit_as_four])
def test_the_classic_held_bytes_mistakes_fail(mistake):
    rejected(check_held_bytes, mistake, SPEC, match="than the trainer holds between steps")


def test_the_published_held_bytes_pass_in_any_numeric_shape(capsys):
    solution = published("06_mixed_precision", "my_held_bytes")
    check_held_bytes(solution, SPEC)
    assert "Correct: within 1 % of what the trainer holds between steps in 6 layouts" in \
        capsys.readouterr().out
    check_held_bytes(lambda model, dtype, optimizer: torch.tensor(solution(model, dtype, optimizer)),
                     SPEC)
    check_held_bytes(..., SPEC)
    assert "not answered yet" in capsys.readouterr().out


def test_the_held_bytes_tolerance_is_1_percent_of_what_the_trainer_holds():
    """1 % of the trainer's figure, as the lesson says, not of the larger of the two: a count
    1.05 % above fails (math.isclose's rel_tol would let up to 1.0101 times through)."""
    solution = published("06_mixed_precision", "my_held_bytes")
    rejected(check_held_bytes, lambda m, d, o: solution(m, d, o) * 1.0105, SPEC,
             match="more than 1 % off")


def test_the_trainer_and_the_bytes_tables_refuse_while_the_function_runs():
    def runs_the_trainer(model, dtype, optimizer):
        from gpututor.precision import master_weights
        run = master_weights.train_master_weights(SPEC.replace(steps=1, optimizer=optimizer), dtype)
        return sum(run.memory.values())

    def reads_the_tables(model, dtype, optimizer):
        from gpututor.formulas import bytes_per_value, optimizer_state_bytes
        return (4 + bytes_per_value(dtype) + optimizer_state_bytes(optimizer)) * count(model)

    def reads_the_planner(model, dtype, optimizer):
        from gpututor.plan.memory import bytes_per_param
        return bytes_per_param(dtype, optimizer).total * count(model)

    def builds_and_steps_an_optimizer(model, dtype, optimizer):
        """The examiner's walk-around: measure instead of count, by building the optimizer,
        taking one step on zero gradients and summing the bytes of what it then holds."""
        import copy
        from gpututor.measure.memory import optimizer_tensors, tensor_bytes
        compute = copy.deepcopy(model).to({"fp32": torch.float32, "bf16": torch.bfloat16,
                                           "fp16": torch.float16}[dtype])
        opt = (torch.optim.AdamW(model.parameters()) if optimizer == "adamw"
               else torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        return (tensor_bytes(model.parameters()) + tensor_bytes(compute.parameters())
                + tensor_bytes(optimizer_tensors(opt)))

    def reads_a_state_it_did_not_build(model, dtype, optimizer):
        from gpututor.measure.memory import state_bytes
        return sum(state_bytes(model, None).values()) * 3

    for candidate in (runs_the_trainer, reads_the_tables, reads_the_planner,
                      builds_and_steps_an_optimizer, reads_a_state_it_did_not_build):
        rejected(check_held_bytes, candidate, SPEC,
                 match="ran the trainer, the package's bytes per parameter or an optimizer")
    assert isinstance(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1),
                      torch.optim.Optimizer)              # optimizers build again afterwards
    rejected(check_held_bytes, lambda model, dtype, optimizer: "many", SPEC,
             match="did not return a number")
    from gpututor.formulas import optimizer_state_bytes
    assert optimizer_state_bytes("sgd") == 4                  # restored afterwards


def test_the_cases_are_layouts_the_lesson_does_not_print():
    assert PRINTED not in HELD_CASES
    assert {case[2] for case in HELD_CASES} == {"fp32", "bf16", "fp16"}
    assert {case[3] for case in HELD_CASES} == {"adamw", "sgd"}
    rng = random.Random(0)
    for _ in range(50):
        assert all(case != PRINTED and case not in HELD_CASES for case in drawn_held_cases(2, rng))


def test_the_held_bytes_are_measured_after_a_step_that_was_taken(capsys, monkeypatch):
    """A starting scale that overflows skips the first fp16 steps (no optimizer state yet): the
    check goes on until a step is taken, so the published count still passes."""
    from gpututor.lessons.mixed_precision import exercises
    monkeypatch.setattr(exercises, "DynamicLossScaler", lambda: DynamicLossScaler(init_scale=2.0**40))
    exercises.held_after_a_taken_step.cache_clear()
    try:
        assert all(r.skipped for r in exercises.train_master_weights(
            SPEC.replace(model_size="tiny", steps=1, batch_size=2, seq_len=16), "fp16",
            exercises.DynamicLossScaler()).results)
        check_held_bytes(published("06_mixed_precision", "my_held_bytes"), SPEC)
        assert "Correct" in capsys.readouterr().out
    finally:
        exercises.held_after_a_taken_step.cache_clear()


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
        check_held_bytes(..., SPEC)
        out = capsys.readouterr().out
        assert "梯度在 fp16 中被冲刷为 0 的阈值" in out and "保存的字节数：尚未作答" in out
        with pytest.raises(AssertionError, match="保存的字节数：在 moe tiny 模型、bf16 副本和 sgd 时"):
            check_held_bytes(the_printed_figure, SPEC)
        with pytest.raises(AssertionError, match="损失缩放器：在第 3 节的那串梯度上.*(偏高|偏低)"):
            check_loss_scaler(grows_one_step_late, STREAM)
    finally:
        set_language("en")
