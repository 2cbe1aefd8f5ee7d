"""Lesson 01b's checkers (``gpututor.lessons.one_device.exercises``): each accepts the lesson's
published solution, read from its Solutions cell, and rejects plausible wrong answers, each named
by the mistake it models; the online-softmax checker also refuses the package's attention and an
update that keeps the blocks it saw instead of the running state."""
import ast
import inspect
import math
import random
import re

import numpy as np
import pytest
import torch

from gpututor import RunSpec, build_model
from gpututor.models import count_parameters
from gpututor.i18n import ZH, set_language
from gpututor.lessons.one_device import exercises as one_device_exercises
from gpututor.lessons.common.one_device import recomputation_costs
from gpututor.lessons.one_device.exercises import (check_8bit_state_bytes, check_full_saving,
                                                   check_offload_link_bytes, check_online_softmax,
                                                   check_probs_bytes)
from gpututor.model_sizes import MODEL_SIZES
from gpututor.measure.attention_cost import attention_costs
from gpututor.precision.adam8bit import Adam8bit
from exercise_solutions import published as _published, rejected



def published(variable: str, **names):
    return _published("01b_one_device", variable, torch=torch, **names)


# ---- exercise 1: the bytes of P ---------------------------------------------------------------

ROWS = [{"way": "naive", "seq_len": 512, "saved_bytes": 4_718_592},   # as section 1 measures
        {"way": "tiled", "seq_len": 512, "saved_bytes": 270_336}]


def test_probs_bytes_takes_the_formula_and_rejects_the_classic_mistakes(capsys):
    check_probs_bytes(published("my_probs_bytes"), ROWS)
    out = capsys.readouterr().out
    assert "Correct. bytes of P at T = 512: 4.194e+06 (the formula gives 4.194e+06)" in out
    assert "naive attention kept at T = 512: 4,718,592 bytes, of which P is 89%" in out
    wrong = {"one head only": 512 * 512 * 4, "forgot the 4 bytes of fp32": 4 * 512 * 512,
             "T x head size, not T x T": 4 * 512 * 32 * 4, "S and P both": 2 * 4 * 512 * 512 * 4,
             "the measured total": 4_718_592}
    for mistake, answer in wrong.items():
        rejected(check_probs_bytes, answer, ROWS, match=f"{answer} is not what the formula gives")
    for shape in (np.int64(4 * 512 * 512 * 4), torch.tensor(4 * 512 * 512 * 4), 4194304.0):
        check_probs_bytes(shape, ROWS)


def test_probs_bytes_asks_about_the_lessons_own_measurement():
    """The checker's batch and heads are those ``attention_costs`` measured with."""
    measured = inspect.signature(attention_costs).parameters
    checker = inspect.signature(check_probs_bytes).parameters
    assert checker["batch"].default == measured["batch"].default == 1
    assert checker["heads"].default == measured["heads"].default


# ---- exercise 2: 8-bit Adam's state per parameter --------------------------------------------

ADAM = {"Adam (fp32 state)": {"state_bytes_per_param": 8.0004},
        "Adam, 8-bit state": {"state_bytes_per_param": 2.1292}}   # as section 3 measures


def test_8bit_state_takes_the_formula_and_rejects_the_classic_mistakes(capsys):
    check_8bit_state_bytes(published("my_bytes_per_param"), ADAM)
    out = capsys.readouterr().out
    assert "Correct. 8-bit state bytes per parameter: 2.125 (the formula gives 2.125)" in out
    assert "section 3's run measured 2.1292 bytes per parameter" in out
    wrong = {"forgot the scales": 2, "one scale per block for m and v together": 2 + 4 / 64,
             "a scale per number": 2 + 2 * 4, "fp32 Adam's": 8,
             "pasted the printed measurement (padding)": 2.129}
    for mistake, answer in wrong.items():
        rejected(check_8bit_state_bytes, answer, ADAM,
                 match=re.escape(f"{answer!r} is not what the formula gives"))


def test_the_padding_alone_makes_the_measured_figure(capsys):
    """The run's state bytes beyond the formula are the padding to whole blocks, counted on the
    model; the step counters are Python ints and add no tensor bytes."""
    from gpututor.precision.adam8bit import state_bytes_per_param
    model = build_model(RunSpec(model="gpt", model_size="tiny"))
    optimizer = Adam8bit(model.parameters())
    model(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    optimizer.step()
    assert all(isinstance(s["step"], int) for s in optimizer.state.values())
    measured = state_bytes_per_param(optimizer)
    assert one_device_exercises.padded_state_bytes(model) == measured > 2.125
    run = {"Adam, 8-bit state": {"state_bytes_per_param": measured, "model": model}}
    check_8bit_state_bytes(2.125, run)
    out = capsys.readouterr().out
    assert "the padding of each tensor to whole blocks adds the rest" in out
    assert f"padded to whole blocks of 64: {measured:.4f} bytes per parameter" in out


def test_8bit_state_asks_about_the_optimizers_own_block():
    assert inspect.signature(check_8bit_state_bytes).parameters["block"].default == \
        inspect.signature(Adam8bit).parameters["block"].default


# ---- exercise 3: what full recomputation saves, predicted ----------------------------------------

def count_none(s, b, h, a):            # section 2's count of one layer, fp32, no dropout
    return s * b * h * (64 + 4 * a * s / h)


def the_papers_count(seq_len, micro_batch, d_model, n_head, n_layer):   # 16-bit and dropout
    sbh = seq_len * micro_batch * d_model
    return n_layer * (sbh * (34 + 5 * n_head * seq_len / d_model) - 2 * sbh)


def scores_left_out(seq_len, micro_batch, d_model, n_head, n_layer):    # the T² term forgotten
    return n_layer * 60 * seq_len * micro_batch * d_model


def full_keeps_nothing(seq_len, micro_batch, d_model, n_head, n_layer): # the layer's input too
    return n_layer * count_none(seq_len, micro_batch, d_model, n_head)


def one_layer(seq_len, micro_batch, d_model, n_head, n_layer):          # forgot the n_layer
    sbh = seq_len * micro_batch * d_model
    return count_none(seq_len, micro_batch, d_model, n_head) - 4 * sbh


def section_2s_difference(seq_len, micro_batch, d_model, n_head, n_layer):   # pasted
    return 39_289_352 - 3_555_848


def the_factor(seq_len, micro_batch, d_model, n_head, n_layer):         # the old question's ratio
    return (64 + 4 * n_head * seq_len / d_model) / 4


@pytest.mark.parametrize("mistake", [the_papers_count, scores_left_out, full_keeps_nothing,
                                     one_layer, section_2s_difference, the_factor])
def test_the_classic_recomputation_mistakes_fail(mistake):
    rejected(check_full_saving, mistake, match="than full recomputation saved in the checker's run")


def test_the_published_prediction_passes_and_so_does_an_exact_count(capsys):
    check_full_saving(published("my_full_saving"))
    assert "Correct: within 3 % of what full recomputation saved in 6 configurations" in \
        capsys.readouterr().out

    def with_mask_and_norm_statistics(seq_len, micro_batch, d_model, n_head, n_layer):
        sbh = seq_len * micro_batch * d_model          # what the probe finds, to the byte
        return n_layer * (sbh * (60 + 4 * n_head * seq_len / d_model) + seq_len ** 2
                          + 16 * micro_batch * seq_len)
    check_full_saving(with_mask_and_norm_statistics)
    for case in one_device_exercises.SAVING_CASES:
        cfg = MODEL_SIZES["gpt"][case[0]]
        assert with_mask_and_norm_statistics(case[2], case[1], cfg.d_model, cfg.n_head,
                                             cfg.n_layer) == \
            one_device_exercises.measured_full_saving(*case)
    check_full_saving(...)
    assert "not answered yet" in capsys.readouterr().out


def test_the_packages_count_and_measurement_refuse_while_the_function_runs():
    from gpututor.formulas import activation_bytes_per_layer

    def the_count(seq_len, micro_batch, d_model, n_head, n_layer):
        return n_layer * (activation_bytes_per_layer(seq_len, micro_batch, d_model, n_head,
                                                     bytes_per_value=4, dropout=False)
                          - activation_bytes_per_layer(seq_len, micro_batch, d_model, n_head,
                                                       recompute="full", bytes_per_value=4))

    def the_measurement(seq_len, micro_batch, d_model, n_head, n_layer):
        size = "tiny" if d_model == 96 else "small"
        return one_device_exercises.measured_full_saving(size, micro_batch, seq_len)

    def runs_the_policies(seq_len, micro_batch, d_model, n_head, n_layer):
        size = "tiny" if d_model == 96 else "small"
        rec = recomputation_costs(RunSpec(model="gpt", model_size=size, batch_size=micro_batch,
                                          seq_len=seq_len), policies=("none", "full"), repeats=1)
        return rec[0]["saved_bytes"] - rec[1]["saved_bytes"]

    def lesson_01s_measurement(seq_len, micro_batch, d_model, n_head, n_layer):
        """The examiner's walk-around: lesson 01's probe of the forward pass, with and without
        full recomputation (gpututor.lessons.single_device.exercises.forward_activation_bytes)."""
        from gpututor.lessons.single_device.exercises import forward_activation_bytes
        size = "tiny" if d_model == 96 else "small"
        base = RunSpec(model="gpt", model_size=size, batch_size=micro_batch, seq_len=seq_len,
                       world_size=1)
        return (forward_activation_bytes(base)
                - forward_activation_bytes(base.replace(activation_checkpointing=True)))

    def probes_the_blocks_by_hand(seq_len, micro_batch, d_model, n_head, n_layer):
        from gpututor.measure.memory import LiveBytesProbe
        from gpututor.models import build_model
        size = "tiny" if d_model == 96 else "small"
        model = build_model(RunSpec(model="gpt", model_size=size, batch_size=micro_batch,
                                    seq_len=seq_len, world_size=1))
        x = torch.randn(micro_batch, seq_len, d_model)
        with LiveBytesProbe(list(model.parameters())) as probe:
            for block in model.blocks:
                x = block(x)
        return probe.forward_end

    def runs_a_blocks_parts(seq_len, micro_batch, d_model, n_head, n_layer):
        from gpututor.models import build_model
        size = "tiny" if d_model == 96 else "small"
        block = build_model(RunSpec(model="gpt", model_size=size, world_size=1)).blocks[0]
        x = torch.randn(micro_batch, seq_len, d_model)
        return n_layer * block.mlp(x).nbytes * 8

    for candidate in (the_count, the_measurement, runs_the_policies, lesson_01s_measurement,
                      probes_the_blocks_by_hand, runs_a_blocks_parts):
        rejected(check_full_saving, candidate, match="ran the package's count, its probe or its model")
    rejected(check_full_saving, lambda *sizes: "a lot", match="did not return a number")
    assert activation_bytes_per_layer(64, 1, 128, 4, recompute="full", bytes_per_value=4) == \
        4 * 64 * 128                                   # restored afterwards
    from gpututor.models import GPT, Block
    from gpututor.measure.memory import LiveBytesProbe
    assert "forward" in vars(GPT) and "forward" in vars(Block) and "__enter__" in vars(LiveBytesProbe)
    assert GPT.forward.__module__ == "gpututor.models"  # restored afterwards


def test_the_saving_tolerance_is_3_percent_of_the_measured_saving():
    """3 % of the checker's measured saving, as the lesson says, not of the larger of the two
    (math.isclose's rel_tol would let a prediction up to 1.0309 times through)."""
    exact = lambda s, b, d, h, n: n * (s * b * d * (60 + 4 * h * s / d) + s ** 2 + 16 * b * s)
    rejected(check_full_saving, lambda *sizes: exact(*sizes) * 1.0305,
             match="than full recomputation saved in the checker's run")


def test_the_cases_are_not_section_2s_and_the_count_is_close_on_every_drawable_one():
    rng = random.Random(0)
    for _ in range(50):
        for case in one_device_exercises.drawn_saving_cases(2, rng):
            assert case not in one_device_exercises.SAVING_CASES and case != ("small", 16, 64)
    for size in ("tiny", "small"):                     # the count's gap, by its two terms
        cfg = MODEL_SIZES["gpt"][size]
        for b in (2, 8):
            for s in one_device_exercises.SAVING_LENGTHS:
                left_out = s ** 2 + 16 * b * s
                counted = count_none(s, b, cfg.d_model, cfg.n_head) - 4 * s * b * cfg.d_model
                assert left_out / counted < 0.02, (size, b, s)


def test_the_lesson_states_the_tolerance_the_checker_applies():
    import json
    from test_exercises import ROOT
    cells = json.loads((ROOT / "notebooks" / "01b_one_device.ipynb").read_text())["cells"]
    text = next("".join(c["source"]) for c in cells if "**Exercise 3 (code).**" in "".join(c["source"]))
    assert one_device_exercises.SAVING_TOLERANCE == 0.03 and "within\n3 % of" in text


# ---- exercise 5: the offload link, fp32 gradients and 16-bit parameters-----------------------------------------------

N = count_parameters(build_model(RunSpec(model="gpt", model_size="small")))   # the small GPT's
OFF = {"Adam offloaded to the host": {"parameters": N,
                                      "bytes_per_step": {"to_host": 4 * N, "to_device": 4 * N}}}


def test_offload_link_bytes_takes_the_formula_and_rejects_the_classic_mistakes(capsys):
    check_offload_link_bytes(published("my_link_bytes", n_params=N), OFF)
    out = capsys.readouterr().out
    assert "Correct. bytes to the host per step, fp32 gradients: 3.354e+06" in out
    assert "Correct. bytes back to the device per step, 16-bit parameters: 1.677e+06" in out
    assert "section 4's fp32 run counted 3,353,600 bytes to the host and 3,353,600 back per " \
        "step: 4 bytes a number each way" in out
    wrong = {"fp32, as in section 4's run (pasted)": (4 * N, 4 * N),
             "the 16-bit case section 4 printed (halves pasted)": (2 * N, 2 * N),
             "the directions swapped": (2 * N, 4 * N),
             "the state kept on the host": (12 * N, 12 * N)}
    for mistake, answer in wrong.items():
        rejected(check_offload_link_bytes, answer, OFF, match="is not what the formula gives")
    for mistake, answer in {"both directions as one number": 4 * N,
                            "fp32, one direction (the recorded to_host)": 4 * N,
                            "three numbers": (4 * N, 2 * N, 0), "a string": "2, 2"}.items():
        rejected(check_offload_link_bytes, answer, OFF, match="give a pair")


# ---- exercise 4: the online-softmax update ----------------------------------------------------

def test_online_softmax_checker_accepts_the_update_and_rejects_the_classic_mistakes(capsys):
    check_online_softmax(published("my_update"))
    assert "Correct: the same as softmax(S) @ V whole" in capsys.readouterr().out

    def no_rescale(m, l, acc, s, v):          # forgot the rescale
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[:, None])
        return m_new, l + p.sum(dim=-1), acc + p @ v

    def rescales_acc_only(m, l, acc, s, v):   # forgot to rescale l
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[:, None])
        c = torch.exp(m - m_new)
        return m_new, l + p.sum(dim=-1), acc * c[:, None] + p @ v

    def rescale_upside_down(m, l, acc, s, v):   # exp(m_new - m_old)
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[:, None])
        c = torch.exp(m_new - m).nan_to_num(posinf=0.0)   # the first block: exp(inf) -> 0
        return m_new, l * c + p.sum(dim=-1), acc * c[:, None] + p @ v

    # one key block needs no rescale: each first fails on the blocks of 8
    for wrong in (no_rescale, rescales_acc_only, rescale_upside_down):
        rejected(check_online_softmax, wrong,
                 match=re.escape("with key blocks of 8, acc / l is not softmax(S) @ V (did you "
                                 "rescale l and acc by exp(m_old - m_new) when the maximum rose?)"))

    def forgot_to_return_acc(m, l, acc, s, v):
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[:, None])
        c = torch.exp(m - m_new)
        return m_new, l * c + p.sum(dim=-1)

    rejected(check_online_softmax, forgot_to_return_acc,
             match=r"your update failed with key blocks of 23: ValueError: not enough values")


def test_an_update_that_keeps_the_blocks_it_saw_fails_on_a_state_it_did_not_make():
    """Walking round the online softmax: keep every block seen and compute softmax whole. It
    gives the right acc / l over a sequence of calls, but not from a state it did not make."""
    seen = []

    def keeps_the_blocks(m, l, acc, s, v):
        if torch.isinf(m).all():             # a new sequence of blocks begins
            seen.clear()
        seen.append((s, v))
        scores, values = torch.cat([b for b, _ in seen], 1), torch.cat([b for _, b in seen], 0)
        m_new = scores.amax(dim=-1)
        p = torch.exp(scores - m_new[:, None])
        return m_new, p.sum(dim=-1), p @ values

    rejected(check_online_softmax, keeps_the_blocks,
             match=r"given the running state of keys 0-8 and the block of keys 9-15, your (m|l|acc)"
                   r" is not that of keys 0-15: the update must use the m, l and acc it is given")


def test_the_packages_attention_is_refused_while_the_update_runs():
    from gpututor.attention import tiled_forward as imported_before

    def via_the_package(m, l, acc, s, v):
        imported_before(s[None, None], s[None, None], v.T[None, None], 4)
        return m, l, acc

    rejected(check_online_softmax, via_the_package,
             match=re.escape("your update called the package's attention (gpututor.attention)"))
    q = torch.randn(1, 1, 8, 4)                      # and it works again afterwards
    assert imported_before(q, q, q, 4)[0].shape == q.shape


def test_an_update_in_another_reasonable_shape_passes(capsys):
    def columns_and_a_list(m, l, acc, s, v):   # m and l kept as columns, a list returned
        m, l = m.reshape(-1, 1), l.reshape(-1, 1)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        c = torch.exp(m - m_new)
        return [m_new, l * c + p.sum(dim=-1, keepdim=True), acc * c + p @ v]

    check_online_softmax(columns_and_a_list)
    assert "Correct" in capsys.readouterr().out


# ---- Chinese -------------------------------------------------------------------------------

def _templates(module) -> set[str]:
    """Every literal template the module passes to ``tr`` or as a checker's ``what``."""
    found = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("tr", "check_answer"):
            index = 0 if node.func.id == "tr" else 2
            if len(node.args) > index and isinstance(node.args[index], ast.Constant):
                found.add(node.args[index].value)
    return found


def test_every_message_of_the_checkers_has_its_chinese_line(capsys):
    templates = _templates(one_device_exercises) | {"bytes of P at T = 512"}
    assert len(templates) >= 10 and sorted(t for t in templates if t not in ZH) == []
    set_language("zh")
    try:
        check_probs_bytes(4 * 512 * 512 * 4, ROWS)
        check_offload_link_bytes((4 * N, 2 * N), OFF)
        check_online_softmax(...)
        check_full_saving(...)
        out = capsys.readouterr().out
        assert "T = 512 时 P 的字节数" in out and "其中 P 占 89%" in out and "公式给出" in out
        assert "每步传到主机的字节数（fp32 梯度）" in out and "尚未作答" in out
        assert "重计算省下的字节数：尚未作答" in out
    finally:
        set_language("en")


def test_the_float_answers_are_compared_exactly_enough():
    """The formula's 2.125 is exact, so a tight tolerance rejects the measured 2.129."""
    assert not math.isclose(2.129, 2.125, rel_tol=1e-4)
