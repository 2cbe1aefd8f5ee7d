"""Lesson 07's checkers (``gpututor.lessons.compression.exercises``): the published solution of
every exercise passes, plausible wrong answers fail, each named by its mistake, and the
code exercises cannot be passed by calling the package's quantizer, the checker's own reference,
torchao's, torch's quantize or fake-quantize ops or torch.ao's observers."""

import numpy as np
import pytest
import torch

from gpututor import RunSpec, build_model
from gpututor.compression import quantize
from gpututor.i18n import set_language
from gpututor.lessons.compression import torchao_codes
from gpututor.lessons.compression.exercises import (check_int8_bytes, check_quantize,
                                                    check_removed_parameters, checker_weights)
from gpututor.lessons.compression.torchao_codes import (RATIO_FORMS, changed_bounds,
                                                        changes_weights, check_torchao_changes,
                                                        torchao_rule_codes)
from exercise_solutions import published as _published, rejected

TEACHER_SPEC = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1,
                       batch_size=32, seq_len=16, steps=500, lr=1e-3)   # lesson 07's teacher


def published(variable: str, **names):
    return _published("07_compression", variable, torch=torch, **names)


@pytest.fixture(scope="module")
def teacher():
    torch.manual_seed(0)
    return build_model(TEACHER_SPEC).eval()   # untrained: the counts and the rule are the same


# ---- exercises 1-3: numbers of the lesson's models -----------------------------------------------

def _rules(weight, theirs_scale=127.5, low=-128, reciprocal=True, per_row=True, dtype=None,
           ours_low=-127):
    w = weight.detach().to(dtype or torch.float32)
    amax = w.abs().amax(dim=1, keepdim=True) if per_row else w.abs().max()
    ours = torch.round(w / (amax / 127)).clamp(ours_low, 127)
    scale = amax / theirs_scale
    theirs = torch.round(w * (1 / scale) if reciprocal else w / scale)
    return ours, theirs if low is None else theirs.clamp(low, 127)


def _count(**rules):
    return lambda w: (lambda o, t: (o != t).sum(1))(*_rules(w, **rules))


def _extreme_never_counted(weight):
    ours, theirs = _rules(weight)
    w = weight.detach().float()
    return ((ours != theirs) & (w.abs() < w.abs().amax(dim=1, keepdim=True))).sum(1)


WRONG_CHANGES = {
    "as if torchao's rule were ours": lambda w: torch.zeros(w.shape[0], dtype=torch.long),
    "forgot to clamp: +128 is no int8": lambda w: (lambda o, t: (o != t).sum(1))(
        *_rules(w, low=None)),
    "128 levels, not 127.5": lambda w: (lambda o, t: (o != t).sum(1))(*_rules(w, 128)),
    "one scale for the whole matrix": lambda w: (lambda o, t: (o != t).sum(1))(
        *_rules(w, per_row=False)),
    "the total, not one count per row": lambda w: int((lambda o, t: (o != t).sum())(*_rules(w))),
    "the teacher's row 3 pasted": lambda w: [10] * w.shape[0],
    "torchao's codes clamped to [-127, 127], as ours": _count(low=-127),
    "a row's extreme never counted": _extreme_never_counted,
}


def test_the_torchao_changes_pass_and_the_classic_mistakes_fail(teacher, capsys):
    right = published("my_changed")
    check_torchao_changes(right, teacher)
    row3 = int(right(teacher.blocks[0].attn.qkv.weight)[3])
    assert (f"Row 3 of the teacher's blocks[0].attn.qkv.weight: your function counts {row3} "
            "weights whose int8 code differs") in capsys.readouterr().out
    check_torchao_changes(lambda w: right(w).tolist(), teacher)          # a list passes too
    check_torchao_changes(lambda w: right(w).numpy()[:, None], teacher)  # and a column array
    # w / scale rounds like w * (1 / scale) but at half steps; float64 too; and ours clamped to
    # [-128, 127] is ours (|w| / scale never passes 127 by a half step under our rule)
    for way in (_count(reciprocal=False), _count(dtype=torch.float64),
                _count(reciprocal=False, dtype=torch.float64), _count(ours_low=-128)):
        check_torchao_changes(way, teacher)
    for mistake, answer in WRONG_CHANGES.items():
        rejected(check_torchao_changes, answer, teacher,
                 match="your count for row|not one whole count per row")
    rejected(check_torchao_changes, 10, teacher, match="pass your function my_changed itself")
    check_torchao_changes(..., teacher)
    assert "not answered yet" in capsys.readouterr().out


def test_the_weights_it_counts_on_are_drawn_afresh_and_the_bounds_are_tight(teacher):
    """The drawn weight changes from one check to the next, no weight has a row of zeros, and
    the bounds leave room only at half steps: the counts of the two rules in float32 lie inside
    them, and nearly every row allows one count only, or two where its extreme is negative."""
    drawn = {changes_weights(teacher)["a weight drawn at this check"].sum().item()
             for _ in range(4)}
    assert len(drawn) > 1
    loose = total = 0
    for name, weight in changes_weights(teacher, seed=5).items():
        assert (weight.detach().abs().amax(dim=1) > 0).all(), name
        fewest, most = changed_bounds(weight)
        counted = published("my_changed")(weight)
        assert ((fewest <= counted) & (counted <= most)).all(), name
        w = weight.detach()
        negative = w[torch.arange(len(w)), w.abs().argmax(dim=1)] < 0
        loose, total = loose + int((most - fewest > negative.long()).sum()), total + len(w)
    assert loose <= 0.05 * total


def test_calling_a_quantizer_is_refused_in_the_torchao_exercise(teacher):
    def package(weight):
        ours, _ = quantize.quantize_per_channel(weight)
        return (ours.float() != torch.stack([torchao_rule_codes(r) for r in weight])).sum(1)

    def by_rule_codes(weight):
        return (torch.stack([torchao_rule_codes(r) for r in weight]) != 0).sum(1)

    def checkers_own(weight):
        return changed_bounds(weight)[0]

    def checkers_helper(weight):
        w = weight.detach().float()
        amax = w.abs().amax(dim=1, keepdim=True)
        ours = torchao_codes._codes_every_way(w, amax, 127, -127, 127)[0]
        theirs = torchao_codes._codes_every_way(w, amax, 127.5, -128, 127)[0]
        return (ours != theirs).sum(1)

    def fake_quantize_per_row(weight):
        rows = []
        for r in weight.detach().float():
            amax = float(r.abs().max())
            ours = torch.fake_quantize_per_tensor_affine(r, amax / 127, 0, -127, 127)
            theirs = torch.fake_quantize_per_tensor_affine(r, amax / 127.5, 0, -128, 127)
            rows.append(int((torch.round(ours / (amax / 127))
                             != torch.round(theirs / (amax / 127.5))).sum()))
        return rows

    def observer_scales(weight):
        from torch.ao.quantization.observer import PerChannelMinMaxObserver
        w = weight.detach().float()
        scales = []
        for low in (-127, -128):
            observer = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8,
                                                qscheme=torch.per_channel_symmetric,
                                                quant_min=low, quant_max=127)
            observer(w)
            scales.append(observer.calculate_qparams()[0][:, None])
        ours = torch.round(w / scales[0]).clamp(-127, 127)
        theirs = torch.round(w * (1 / scales[1])).clamp(-128, 127)
        return (ours != theirs).sum(1)

    ways = [package, by_rule_codes, checkers_own, checkers_helper, fake_quantize_per_row,
            observer_scales]
    if quantize.torchao_version():
        def through_torchao(weight):
            layer = torch.nn.Sequential(torch.nn.Linear(weight.shape[1], weight.shape[0]))
            layer[0].weight.data.copy_(weight.detach())
            codes = quantize.quantize_torchao_int8(layer)[0].weight.qdata
            return (codes != 0).sum(1)

        def torchao_op(weight):
            from torchao.quantization.quant_primitives import MappingType, choose_qparams_affine
            scale, _ = choose_qparams_affine(weight.detach(), MappingType.SYMMETRIC,
                                             (1, weight.shape[1]), torch.int8)
            return (weight.detach() / scale[:, None] > 0).sum(1)
        ways += [through_torchao, torchao_op]
    for way in ways:
        rejected(check_torchao_changes, way, teacher,
                 match="called one of the references")
    if quantize.torchao_version():   # outside the check, torchao works again
        assert quantize.quantize_torchao_int8(torch.nn.Sequential(torch.nn.Linear(4, 3)))


def test_the_torchao_rule_is_torchaos_own(teacher):
    """The checker's formula is torchao's rule, computed in torchao's order (w * (1/scale)): its
    codes equal torchao's Int8Tensor's on every weight, and a negative extreme gets -128 or -127."""
    if not quantize.torchao_version():
        pytest.skip("torchao is not installed")
    weight = teacher.blocks[0].attn.qkv.weight.detach()
    theirs = quantize.quantize_torchao_int8(teacher).blocks[0].attn.qkv.weight.qdata.float()
    ours = torch.stack([torchao_rule_codes(r) for r in weight])
    assert torch.equal(ours, theirs)
    rows = torch.arange(weight.shape[0])
    extreme = weight.abs().argmax(dim=1)
    negative = weight[rows, extreme] < 0
    assert set(ours[rows, extreme][negative].tolist()) == {-128.0, -127.0}
    # and the checker's bounds hold torchao's own codes' count against ours, row by row
    counted = (quantize.quantize_per_channel(weight)[0].float() != theirs).sum(dim=1)
    fewest, most = changed_bounds(weight)
    assert ((fewest <= counted) & (counted <= most)).all()


def test_some_rows_negative_extremes_get_minus_128_every_way(teacher):
    """The weight made for it: each row's extreme is negative and gets -128 under torchao's rule
    by every way the checker allows (five forms, float32 and float64), and under torchao's own
    code where torchao loads; so the count must include it: exactly one count per row allowed."""
    name = "a 6x8 weight whose rows' negative extremes get -128 however it is computed"
    weight = changes_weights(teacher, seed=5)[name]
    rows = torch.arange(weight.shape[0])
    extreme = weight.abs().argmax(dim=1)
    assert (weight[rows, extreme] < 0).all()
    for dtype in (torch.float32, torch.float64):
        w = weight.to(dtype)
        amax = w.abs().amax(dim=1, keepdim=True)
        for form in RATIO_FORMS:
            codes = torch.round(form(w, amax, 127.5)).clamp(-128, 127)
            assert (codes[rows, extreme] == -128).all()
    fewest, most = changed_bounds(weight)
    assert torch.equal(fewest, most) and (fewest >= 1).all()
    if quantize.torchao_version():
        layer = torch.nn.Sequential(torch.nn.Linear(weight.shape[1], weight.shape[0]))
        layer[0].weight.data.copy_(weight)
        theirs = quantize.quantize_torchao_int8(layer)[0].weight.qdata
        assert (theirs[rows, extreme] == -128).all()


def test_the_removed_parameters_pass_and_the_classic_mistakes_fail(capsys):
    from gpututor.compression import distill
    student = distill.build_student(TEACHER_SPEC.replace(steps=200, lr=3e-3, seed=1),
                                    (("n_layer", 1), ("n_head", 2), ("d_model", 64)))
    check_removed_parameters(published("my_removed"), student)
    assert "exactly, for 3 shapes, the student's among them" in capsys.readouterr().out
    wrong = {"forgot fc's biases": lambda d, n, s: n * round(s * 4 * d) * (d + d),
             "counted proj's bias too: it stays": lambda d, n, s: n * round(s * 4 * d) * (2 * d + 2),
             "one block only": lambda d, n, s: round(s * 4 * d) * (2 * d + 1),
             "the student's number pasted": lambda d, n, s: 8_256}
    for mistake, answer in wrong.items():
        rejected(check_removed_parameters, answer, student, match="is not the count on the shrunk")
    from gpututor.compression import prune
    rejected(check_removed_parameters, lambda d, n, s: prune.shrink_mlps(student, s) and 0, student,
             match="called prune.shrink_mlps")
    check_removed_parameters(..., student)
    assert "not answered yet" in capsys.readouterr().out


def test_the_int8_bytes_pass_and_the_classic_mistakes_fail(teacher, capsys):
    quantized = {"int8 from scratch": quantize.quantize_linears(teacher)}
    check_int8_bytes(published("my_int8_bytes", teacher=teacher), quantized)
    assert "Correct. bytes of int8 weights and scales" in capsys.readouterr().out
    linears = [m for m in teacher.modules() if isinstance(m, torch.nn.Linear)]
    in_blocks = [m for m in teacher.blocks.modules() if isinstance(m, torch.nn.Linear)]
    for mistake in (sum(m.weight.numel() for m in linears),                      # forgot the scales
                    sum(m.weight.numel() + m.out_features for m in linears),     # 1-byte scales
                    sum(m.weight.numel() + 4 * m.out_features for m in in_blocks),  # forgot the head
                    sum(m.weight.numel() + m.bias.numel() * 5 for m in linears   # counted biases
                        if m.bias is not None)):
        rejected(check_int8_bytes, mistake, quantized, match="is not what counting on the model gives")


# ---- exercise 4: the quantizer -----------------------------------------------------------------

def _published_quantize():
    return published("my_quantize")


def test_the_published_quantizer_passes_and_in_float64_too(capsys):
    check_quantize(_published_quantize())
    assert "Correct: your int8 values and scales match the package's (scales within 10^-5, " \
        "values equal but at half steps) on 4 weights" in capsys.readouterr().out

    def in_float64(weight):
        w = weight.detach().double()
        scale = w.abs().amax(dim=1) / 127
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        return torch.round(w / scale[:, None]).to(torch.int8), scale[:, None]   # (rows, 1) too
    check_quantize(in_float64)
    check_quantize(...)
    assert "not answered yet" in capsys.readouterr().out


def divides_by_128(weight):
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / 128).clamp(min=1e-30)
    return torch.round(w / scale[:, None]).clamp(-128, 127).to(torch.int8), scale


def forgot_the_abs(weight):
    w = weight.detach().float()
    scale = (w.amax(dim=1) / 127).clamp(min=1e-30)
    return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def no_floor_for_rows_of_zeros(weight):
    w = weight.detach().float()
    scale = w.abs().amax(dim=1) / 127
    return torch.round(w / scale[:, None]).to(torch.int8), scale


def truncates(weight):
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-30)
    return torch.trunc(w / scale[:, None]).to(torch.int8), scale


def one_scale_for_the_matrix(weight):
    w = weight.detach().float()
    scale = w.abs().max() / 127
    return torch.round(w / scale).to(torch.int8), scale.expand(w.shape[0])


def keeps_floats(weight):
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-30)
    return torch.round(w / scale[:, None]), scale


def uses_minus_128(weight):   # the right scales, but the levels shifted by one toward -128
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-30)
    return (torch.round(w / scale[:, None]) - (w < 0).to(w.dtype)).to(torch.int8), scale


@pytest.mark.parametrize("candidate, match", [
    (divides_by_128, "the scale of row 0 is too small"),
    (forgot_the_abs, r"the scale of row 0 \(its largest \|w\| is a negative weight\) is too"),
    (no_floor_for_rows_of_zeros, "the scale of row 2, a row of zeros, is 0.0"),
    (truncates, "int8 values are not. They all lie nearer 0: truncated"),
    (one_scale_for_the_matrix, "every row has the same scale"),
    (keeps_floats, "q is torch.float32, not torch.int8"),
    (uses_minus_128, "q uses -128"),
    (lambda weight: weight, r"not two tensors \(q, scale\)"),
    (lambda weight: 1 / 0, "your function failed: ZeroDivisionError"),
])
def test_the_classic_mistakes_fail_saying_what_differs(candidate, match):
    rejected(check_quantize, candidate, match=match)


def test_a_quantizer_that_divides_its_argument_in_place_is_compared_with_the_original():
    def in_place(weight):
        w = weight.detach()
        scale = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        return w.div_(scale[:, None]).round_().to(torch.int8), scale   # fine: w is its own copy
    check_quantize(in_place)
    state = torch.random.get_rng_state()
    checker_weights()
    assert torch.equal(state, torch.random.get_rng_state())   # the notebook's seed is untouched


def test_the_negative_extremes_and_the_row_of_zeros_are_in_the_checkers_weights():
    weights = checker_weights()
    signed = weights["a 5x12 weight with negative extremes and a row of zeros"]
    assert signed[0].abs().argmax() == signed[0].argmin() and (signed[1] < 0).all()
    assert (signed[2] == 0).all()
    assert any(isinstance(w, torch.nn.Parameter) for w in weights.values())
    # no entry sits on a half step, where two right roundings could differ
    for w in weights.values():
        q, scale = quantize.quantize_per_channel(w)
        ratio = w.detach().double() / scale.double()[:, None]
        assert (((ratio - ratio.floor()) - 0.5).abs() > 1e-3).all()


def test_calling_the_reference_is_refused_however_it_is_reached():
    from gpututor.compression.quantize import quantize_per_channel as imported_before

    def package(weight):
        return quantize.quantize_per_channel(weight)

    def imported(weight):
        return imported_before(weight)

    def scale_only(weight):
        scale = quantize.symmetric_scale(weight)
        return torch.round(weight.detach() / scale[:, None]).to(torch.int8), scale

    def through_a_layer(weight):
        layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
        layer.weight.data.copy_(weight.detach())
        int8 = quantize.Int8Linear.from_linear(layer)
        return int8.q, int8.scale

    def torch_op(weight):
        w = weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        q = torch.quantize_per_channel(w, scale.double(), torch.zeros(len(scale), dtype=torch.long),
                                       0, torch.qint8)
        return q.int_repr(), scale

    def aten_op(weight):
        w = weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        q = torch.ops.aten.quantize_per_channel(w, scale.double(),
                                                torch.zeros(len(scale), dtype=torch.long), 0,
                                                torch.qint8)
        return q.int_repr(), scale

    def fake_quantize_op(weight):
        w = weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        fake = torch.fake_quantize_per_tensor_affine(w / scale[:, None], 1.0, 0, -127, 127)
        return fake.to(torch.int8), scale

    def observer_scale(weight):
        from torch.ao.quantization.observer import PerChannelMinMaxObserver
        w = weight.detach().float()
        observer = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8,
                                            qscheme=torch.per_channel_symmetric,
                                            quant_min=-127, quant_max=127)
        observer(w)
        scale = observer.calculate_qparams()[0]
        return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale

    ways = (package, imported, scale_only, through_a_layer, torch_op, aten_op, fake_quantize_op,
            observer_scale)
    for way in ways:
        rejected(check_quantize, way, match="called the package's quantizer, one of torch's")
    # outside the check, all of them work again
    for way in ways:
        q, scale = way(torch.randn(3, 4))
        assert q.dtype == torch.int8 and scale.shape == (3,)


def test_the_checkers_speak_chinese(teacher, capsys):
    set_language("zh")
    try:
        check_quantize(...)
        check_torchao_changes(..., teacher)
        check_removed_parameters(..., teacher)
        check_int8_bytes(..., {})
        out = capsys.readouterr().out
        for chinese in ("量化：尚未作答", "torchao 的编码：尚未作答", "移除的参数：尚未作答",
                        "int8 权重与缩放因子的字节数"):
            assert chinese in out, (chinese, out)
        with pytest.raises(AssertionError, match="量化：对一个 6x10 的权重，第 0 行的缩放因子偏小"):
            check_quantize(divides_by_128)
    finally:
        set_language("en")
