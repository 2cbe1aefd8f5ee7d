"""Lesson 01's checkers (``gpututor/lessons/single_device/exercises.py``): the published
solutions pass, named plausible mistakes fail for the reason the message gives, and the
FLOPs exercise refuses the package's formula while the learner's function runs (and only then).
The formula it checks against is what PyTorch's FlopCounterMode counts for those models."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from gpututor import RunSpec, build_model
from gpututor.formulas import training_flops_per_token
from gpututor.i18n import set_language
from gpututor.lessons.single_device.exercises import (FLOPS_CASES, check_activation_ratio,
                                                      check_flops_per_step, check_optimizer_bytes,
                                                      check_training_hours,
                                                      reference_flops_per_step)
from gpututor.measure.flops import model_flops_per_token as imported_before
from gpututor.models import count_parameters
from exercise_solutions import published, rejected

STEM = "01_single_device"
SPEC = RunSpec(model="gpt", model_size="small", strategy="single", world_size=1, batch_size=32,
               seq_len=64, steps=8)   # lesson 01's spec
MODEL = build_model(SPEC)
N_PARAMS, N_TENSORS = count_parameters(MODEL), len(list(MODEL.parameters()))
ANATOMY = SimpleNamespace(spec=SPEC, achieved_flops=2.5e9,
                          memory={"optimizer": 8 * N_PARAMS + 4 * N_TENSORS})


def test_optimizer_bytes_are_exactly_adamws_state_on_other_gpts(capsys):
    solution = published(STEM, "my_optimizer_bytes")
    check_optimizer_bytes(solution)
    assert "Correct: your formula gives exactly the bytes AdamW holds" in capsys.readouterr().out
    check_optimizer_bytes(lambda p, t: np.int64(solution(p, t)))
    check_optimizer_bytes(...)
    assert "not answered yet" in capsys.readouterr().out
    rejected(check_optimizer_bytes, lambda p, t: 4 * p + 4 * t,        # one moment
             match="tiny GPT .* yours is less than AdamW holds")
    rejected(check_optimizer_bytes, lambda p, t: 8 * p,                # forgot the step counters
             match="yours is less than AdamW holds")
    rejected(check_optimizer_bytes, lambda p, t: 8 * p + 4 * p,        # a counter per parameter
             match="yours is more than AdamW holds")
    rejected(check_optimizer_bytes, lambda p, t: ANATOMY.memory["optimizer"],   # the lesson's run
             match="tiny GPT")
    rejected(check_optimizer_bytes, lambda p, t: None, match="returned None, not a number")


def test_activation_ratio_is_measured_at_a_sequence_length_no_run_used(capsys):
    from gpututor.lessons.single_device.exercises import forward_activation_bytes
    at_64 = forward_activation_bytes(SPEC.replace(batch_size=16, steps=1))   # as the sweep measures
    runs = [{"sweep_value": 16, "mem_by_category": {"activations": [at_64]}}]
    check_activation_ratio(published(STEM, "my_activation_ratio", batch_runs=runs, spec=SPEC,
                                     build_model=build_model), SPEC)
    assert "Correct. activation ratio" in capsys.readouterr().out
    for mistake in (1,          # as if activations did not grow
                    2,          # in proportion to seq_len: attention's square left out
                    4,          # as if everything grew with seq_len squared
                    0.5):       # upside down
        rejected(check_activation_ratio, mistake, SPEC, match="is not what counting")


def test_training_hours_use_the_formula_at_the_achieved_rate(capsys):
    answer = published(STEM, "my_hours", model=MODEL, spec=SPEC, anatomy=ANATOMY,
                       model_flops_per_token=imported_before)
    check_training_hours(answer, ANATOMY)
    assert "Correct. hours for 1e9 tokens" in capsys.readouterr().out
    n_matmul = sum(m.weight.numel() for m in MODEL.modules() if isinstance(m, nn.Linear))
    for mistake in (1e9 * 2 * N_PARAMS / ANATOMY.achieved_flops / 3600,   # forward only
                    1e9 * 6 * n_matmul / ANATOMY.achieved_flops / 3600,   # forgot attention
                    answer * 3600):                                       # seconds, not hours
        rejected(check_training_hours, mistake, ANATOMY, match="is not what the formula gives")


def test_the_reference_is_what_flop_counter_mode_counts():
    for size, batch_size, seq_len in FLOPS_CASES:
        model = build_model(RunSpec(model="gpt", model_size=size, batch_size=batch_size,
                                    seq_len=seq_len))
        tokens = torch.randint(0, model.cfg.vocab_size, (batch_size, seq_len))
        with FlopCounterMode(display=False) as counter:
            model(tokens).float().mean().backward()
        assert counter.get_total_flops() == reference_flops_per_step(model, batch_size, seq_len)


def test_flops_checker_runs_the_function_on_models_the_learner_does_not_choose(capsys):
    solution = published(STEM, "my_flops_per_step", nn=nn)
    check_flops_per_step(solution)
    assert "Correct: your FLOPs per step equal the formula's" in capsys.readouterr().out
    check_flops_per_step(lambda m, b, s: torch.tensor(float(solution(m, b, s))))   # a 0-d tensor

    def matmuls(model):
        return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))

    def attention(model, s):
        return 2 * 2 * model.cfg.n_layer * s * model.cfg.d_model

    wrong_low = {
        "forward only": lambda m, b, s: (2 * matmuls(m) + attention(m, s)) * b * s,
        "forgot attention": lambda m, b, s: 6 * matmuls(m) * b * s,
        "attention's forward only": lambda m, b, s: (6 * matmuls(m) + attention(m, s)) * b * s,
        "per sequence, not per step": lambda m, b, s: (6 * matmuls(m) + 3 * attention(m, s)) * s,
    }
    for name, candidate in wrong_low.items():
        rejected(check_flops_per_step, candidate, match="yours is less than the formula gives")
    wrong_high = {
        "every parameter, embeddings and biases too":
            lambda m, b, s: (6 * count_parameters(m) + 3 * attention(m, s)) * b * s,
        "the lesson's batch and length, not the ones given":
            lambda m, b, s: (6 * matmuls(m) + 3 * attention(m, 64)) * 32 * 64,
    }
    for name, candidate in wrong_high.items():
        rejected(check_flops_per_step, candidate, match="yours is more than the formula gives")
    rejected(check_flops_per_step, lambda m, b, s: None, match="not a number")

    def calls_the_package(model, batch_size, seq_len):   # the formula it is asked to write
        return imported_before(model, seq_len) * batch_size * seq_len

    def calls_the_formula(model, batch_size, seq_len):
        cfg = model.cfg
        return training_flops_per_token(matmuls(model), cfg.n_layer, seq_len,
                                        cfg.d_model) * batch_size * seq_len

    def counts_instead(model, batch_size, seq_len):   # found by an examiner's reading
        from torch.utils.flop_counter import FlopCounterMode
        with FlopCounterMode(display=False) as counter:
            x = torch.zeros(batch_size, seq_len, dtype=torch.long, device="meta")
            model(x).sum().backward()
        return counter.get_total_flops()

    def runs_the_model(model, batch_size, seq_len):
        model(torch.zeros(batch_size, seq_len, dtype=torch.long, device="meta"))
        return 0

    for candidate in (calls_the_package, calls_the_formula, reference_flops_per_step,
                      counts_instead, runs_the_model):
        rejected(check_flops_per_step, candidate, match="called the package's FLOPs formula")
    assert imported_before(MODEL, 64) > 0   # restored after the check


def test_lesson_01_checkers_speak_chinese(capsys):
    set_language("zh")
    try:
        check_flops_per_step(...)
        assert "每步 FLOPs：尚未作答" in capsys.readouterr().out
        with pytest.raises(AssertionError, match="你的结果比公式给出的少"):
            check_flops_per_step(lambda m, b, s: 1.0)
        with pytest.raises(AssertionError, match="调用了本软件包的 FLOPs 公式"):
            check_flops_per_step(lambda m, b, s: imported_before(m, s) * b * s)
    finally:
        set_language("en")
