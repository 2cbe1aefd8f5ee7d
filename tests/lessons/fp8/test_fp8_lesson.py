"""Lesson 06b: the exercise checker accepts the published solution and rejects named wrong
answers; a few steps of each run train and record what the figures read."""
import random
import textwrap

import pytest
import torch

from exercise_solutions import published, rejected
from gpututor import RunSpec
from gpututor.lessons.fp8.exercises import check_e4m3_cast, e4m3_cast_saturates
from gpututor.lessons.fp8.figures import (bytes_rows, cast_rows, format_rows, loss_verdict,
                                          recipe_flush_sentence, scales_sentence,
                                          weight_bytes_per_step)
from gpututor.lessons.fp8.training import LESSON_RUNS, TORCHAO, train_all


def wrong(code: str):
    scope = {"torch": torch}
    exec(textwrap.dedent(code), scope)
    return scope["my_e4m3_cast"]


def test_the_published_solution_passes():
    check_e4m3_cast(published("06b_fp8", "my_e4m3_cast", torch=torch), random.Random(1))
    check_e4m3_cast(published("06b_fp8", "my_e4m3_cast", torch=torch))


@pytest.mark.parametrize("code, says", [
    ("""def my_e4m3_cast(x, amax):              # upside down
            s = amax / 448.0
            return (x * s).clamp(-448, 448).to(torch.float8_e4m3fn), s""", "max / amax, not"),
    ("""def my_e4m3_cast(x, amax):              # E5M2's largest value
            s = 57344.0 / amax
            return (x * s).clamp(-448, 448).to(torch.float8_e4m3fn), s""", "largest value"),
    ("""def my_e4m3_cast(x, amax):              # its own amax, not the one given
            s = 448.0 / x.abs().max().item()
            return (x * s).clamp(-448, 448).to(torch.float8_e4m3fn), s""", "your scale is"),
    ("""def my_e4m3_cast(x, amax):              # dequantized: divided by the scale again
            s = 448.0 / amax
            return (x * s).clamp(-448, 448).to(torch.float8_e4m3fn).float() / s, s""",
     "are not the E4M3 numbers"),
    ("""def my_e4m3_cast(x, amax):              # rounded through bf16 first
            s = 448.0 / amax
            return (x * s).bfloat16().clamp(-448, 448).to(torch.float8_e4m3fn), s""",
     "are not the E4M3 numbers"),
    ("""def my_e4m3_cast(x, amax):              # the package's own cast
            from gpututor.precision.fp8_casts import cast_with_scale
            c = cast_with_scale(x, torch.tensor(448.0 / amax), "e4m3")
            return c.data, c.scale""", "already has"),
    ("""def my_e4m3_cast(x, amax):              # torchao's
            from torchao.float8 import float8_utils
            s = 448.0 / amax
            return float8_utils.to_fp8_saturated(x * s, torch.float8_e4m3fn), s""", "already has"),
    ("""from torchao.float8.float8_utils import to_fp8_saturated    # bound before the check
def my_e4m3_cast(x, amax):
            s = 448.0 / amax
            return to_fp8_saturated(x * s, torch.float8_e4m3fn), s""", "already has"),
    ("""def my_e4m3_cast(x, amax):              # one value only
            return x.to(torch.float8_e4m3fn)""", "two values"),
])
def test_named_wrong_answers_fail(code, says):
    rejected(check_e4m3_cast, wrong(code), random.Random(2), match=says)


def test_an_answer_without_the_clamp_passes_only_where_the_cast_saturates(capsys):
    no_clamp = wrong("""def my_e4m3_cast(x, amax):              # no clamp to ±448
            s = 448.0 / amax
            return (x * s).to(torch.float8_e4m3fn), s""")
    if e4m3_cast_saturates():      # torch 2.12 on (eager): the cast saturates by itself
        check_e4m3_cast(no_clamp, random.Random(2))
        assert "the clamp is not checked" in capsys.readouterr().out
    else:                          # older torch: values beyond 448 become NaN
        rejected(check_e4m3_cast, no_clamp, random.Random(2), match="became NaN")


def test_a_few_steps_of_every_run_record_what_the_figures_read():
    spec = RunSpec(model="gpt", model_size="tiny", batch_size=4, seq_len=32, steps=3, lr=3e-3)
    runs = train_all(spec)
    assert list(runs) == list(LESSON_RUNS)
    assert all(len(r["losses"]) == 3 for r in runs.values())
    assert "head" not in runs["tensorwise"]["converted"] and len(runs[TORCHAO]["converted"]) == 8
    # torchao's emulated tensorwise and the from-scratch one: the same recipe
    assert runs["tensorwise"]["losses"] == pytest.approx(runs[TORCHAO]["losses"], abs=1e-5)
    headline, details, _ = loss_verdict(runs)
    assert "bf16" in headline and "torchao" in details
    _, rows = cast_rows(runs["tensorwise"])
    assert {r[0] for r in rows} >= {"input", "weight", "grad_output"}
    assert all(r[2] == "0" for r in rows)       # dynamic scales: nothing overflows
    _, rows = bytes_rows(runs)
    assert [r[0] for r in rows] == ["tensorwise", "rowwise", "mxfp8"]
    assert all(0.5 <= float(r[-1]) < 0.54 for r in rows)
    assert "the fewest" in recipe_flush_sentence(runs)
    assert "grad_output: x" in scales_sentence(runs["tensorwise"], "blocks.0.mlp.fc")
    assert [r[1] for r in format_rows()[1]] == ["448", "57344"]
    weights = sum(m.weight.numel() for n, m in runs["tensorwise"]["model"].named_modules()
                  if n in runs["tensorwise"]["converted"])
    assert f"{2 * weights:,} values, {2 * weights:,} bytes in FP8 against {4 * weights:,} in bf16" \
        in weight_bytes_per_step(runs["tensorwise"])


def test_without_torchao_the_lesson_runs_the_five_others_and_says_torchaos_is_not_measured(
        monkeypatch):
    """torchao is an extra (Binder's environment and a plain pip install lack it): the lesson
    then trains the other five runs and its verdict says torchao's was not measured."""
    from gpututor.lessons.fp8 import training
    monkeypatch.setattr(training, "torchao_float8_loads", lambda: False)
    spec = RunSpec(model="gpt", model_size="tiny", batch_size=4, seq_len=32, steps=2, lr=3e-3)
    runs = train_all(spec)
    assert list(runs) == list(LESSON_RUNS[:-1]) and TORCHAO not in runs
    _, details, _ = loss_verdict(runs)
    assert "torchao's run: not measured (torchao is not installed here, or does not load" in details
