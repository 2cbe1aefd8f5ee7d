"""Lesson 07's exercise checkers: each takes the learner's answer and the lesson's own objects
(the trained teacher, the quantized models) and derives what it expects, so the notebook shows
only the call. ``...`` means "not answered yet".

- exercise 1, :func:`.torchao_codes.check_torchao_changes`, has its own module; it refuses
  what this one's quantizer exercise refuses (:data:`QUANTIZERS`, :data:`REFUSED_OPS`,
  :data:`TORCH_QPARAMS`, through :func:`call_on_a_copy`), and more.
- :func:`check_removed_parameters`: the learner's count of the parameters a GPT loses when a
  share of each MLP's hidden neurons is removed, run on the distilled student's shape and on
  shapes no cell builds, against the models ``prune.shrink_mlps`` builds (refused, with
  ``prune.mask_neurons``, while the learner's function runs).
- :func:`check_int8_bytes`: the bytes of the from-scratch int8 model's weights and scales
  (counted on its ``Int8Linear`` layers).
- :func:`check_quantize`: the learner's ``quantize(weight) -> (q, scale)``, run against
  ``compression.quantize.quantize_per_channel`` on weights the learner does not choose (a row of
  zeros, rows whose extreme is negative, rows of very different sizes, a layer's Parameter),
  with the package's quantizer, torch's quantize and fake-quantize ops and torch.ao's observers'
  scale rule refused while it runs.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
from torch.ao.quantization import utils as ao_utils
from torch.ao.quantization.observer import UniformQuantizationObserverBase

from ...compression import quantize
from ...compression.prune import mask_neurons, shrink_mlps
from ...i18n import say, tr
from ...model_sizes import GPTConfig
from ...models import GPT, count_parameters
from ..common.code_exercise import call_refusing
from ..common.exercises import as_number, check_answer


# ---- exercises 2 and 3: parameters removed, bytes held -----------------------------------------

# (d_model, n_layer, n_head, share): shapes no cell builds, beside the student's own
REMOVED_SHAPES = ((48, 3, 2, 0.5), (80, 2, 4, 0.3))


def removed_by_shrinking(d_model: int, n_layer: int, n_head: int, share: float,
                         vocab_size: int) -> int:
    """Parameters a GPT of this shape loses when ``share`` of each MLP's hidden neurons is
    removed, counted on the model :func:`gpututor.compression.prune.shrink_mlps` builds."""
    model = GPT(GPTConfig(vocab_size=vocab_size, n_layer=n_layer, n_head=n_head,
                          d_model=d_model))
    return count_parameters(model) - count_parameters(shrink_mlps(model, share))


def check_removed_parameters(candidate: Callable, student: nn.Module, share: float = 0.25) -> None:
    """Run ``candidate(d_model, n_layer, share)``, the parameters a GPT loses when ``share`` of
    each MLP's hidden neurons is removed, on ``student``'s shape (exercise 2: the distilled
    student, which no cell shrinks) and on :data:`REMOVED_SHAPES`, against the count on the
    models ``shrink_mlps`` builds, exactly; ``shrink_mlps`` and ``mask_neurons`` refuse while it
    runs. Says which shape is wrong, not what the answer is."""
    if candidate is ...:
        say("parameters removed: not answered yet. Define your function and pass it in.")
        return
    cfg = student.cfg
    cases = [(cfg.d_model, cfg.n_layer, share,
              count_parameters(student) - count_parameters(shrink_mlps(student, share)))]
    cases += [(d, layers, s, removed_by_shrinking(d, layers, heads, s, cfg.vocab_size))
              for d, layers, heads, s in REMOVED_SHAPES]
    for d, layers, s, expected in cases:
        case = tr("d = {d}, n_layer = {layers}, {share:.0%} of the neurons", d=d, layers=layers,
                  share=s)
        got = call_refusing(candidate, (d, layers, s), refused=(shrink_mlps, mask_neurons),
                            called=tr("parameters removed: your function called "
                                      "prune.shrink_mlps: count them yourself."),
                            failed=tr("parameters removed [{case}]: your function raised {error}"),
                            case=case)
        number = as_number(got)
        if number is None:
            raise AssertionError(tr("parameters removed [{case}]: your function returned {got}, "
                                    "not a number.", case=case, got=repr(got)))
        if number != expected:
            raise AssertionError(tr("parameters removed [{case}]: yours is not the count on the "
                                    "shrunk model. Which weights and biases does one hidden "
                                    "neuron own in fc and in proj, and does proj's bias go?",
                                    case=case))
    say("Correct: your count equals the parameters shrink_mlps removes, exactly, for {cases} "
             "shapes, the student's among them.", cases=len(cases))


def check_int8_bytes(answer, quantized: dict, variant: str = "int8 from scratch") -> None:
    """Bytes held by the int8 weights and the scales of ``quantized[variant]``'s
    ``Int8Linear`` layers (biases left out), counted on the layers themselves."""
    if answer is ...:
        return check_answer(answer, None, "bytes of int8 weights and scales")
    layers = [m for m in quantized[variant].modules() if isinstance(m, quantize.Int8Linear)]
    held = sum(t.nbytes for m in layers for t in (m.q, m.scale))
    check_answer(answer, held, "bytes of int8 weights and scales", rel_tol=0, source="counted")


# ---- exercise 4: quantize a weight, from scratch ----------------------------------------------

def checker_weights() -> dict[str, torch.Tensor]:
    """The weights the checker quantizes, by what each tries (float32, rows = output channels)."""
    gen = torch.Generator().manual_seed(7)
    plain = torch.randn(6, 10, generator=gen) * 0.05
    signs = torch.rand(5, 12, generator=gen) - 0.5          # entries in (-0.5, 0.5)
    signs[0, 4] = -0.9                                       # row 0's extreme is negative
    signs[1] = -signs[1].abs() - 0.01                        # row 1 is all negative
    signs[2] = 0.0                                           # row 2 is all zero
    sizes = torch.randn(5, 7, generator=gen) * torch.tensor([1e-3, 1.0, 30.0, 1e-6, 0.2])[:, None]
    with torch.random.fork_rng():                            # the notebook's seed stays as it was
        torch.manual_seed(3)
        layer = nn.Linear(16, 8).weight                      # a Parameter that requires grad
    return {"a 6x10 weight": plain, "a 5x12 weight with negative extremes and a row of zeros":
            signs, "a 5x7 weight whose rows differ in size by 10^7": sizes,
            "an nn.Linear(16, 8) weight (a Parameter)": layer}


# what the learner's quantizer must not call: the package's, torch's quantize and fake-quantize
# ops (by name), and the scale rule of torch.ao's observers (MinMaxObserver,
# PerChannelMinMaxObserver, ... compute their scales in these two functions)
QUANTIZERS = (quantize.quantize_per_channel, quantize.symmetric_scale,
           quantize.dequantize_per_channel, quantize.quantization_error,
           quantize.quantize_linears, quantize.Int8Linear.from_linear.__func__)
REFUSED_OPS = tuple((owner, name) for owner in (torch, torch.ops.aten)
                    for name in ("quantize_per_channel", "quantize_per_tensor",
                                 "quantize_per_tensor_dynamic",
                                 "fake_quantize_per_channel_affine",
                                 "fake_quantize_per_tensor_affine",
                                 "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams",
                                 "_fake_quantize_learnable_per_channel_affine",
                                 "_fake_quantize_learnable_per_tensor_affine",
                                 "fused_moving_avg_obs_fake_quant"))
TORCH_QPARAMS = (UniformQuantizationObserverBase._calculate_qparams, ao_utils.determine_qparams)


def call_on_a_copy(candidate: Callable, weight: torch.Tensor, refused: tuple, called: str,
                   failed: str, case: str):
    """``candidate(copy of weight)`` while ``refused`` (functions, refused by their code, and
    ``(owner, name)`` pairs, by name), :data:`REFUSED_OPS` and :data:`TORCH_QPARAMS` refuse."""
    # a copy, so that a function that changes its argument in place is compared with the original
    given = nn.Parameter(weight.detach().clone()) if isinstance(weight, nn.Parameter) \
        else weight.clone()
    by_name = tuple(r for r in refused if isinstance(r, tuple))
    return call_refusing(candidate, (given,),
                         refused=tuple(r for r in refused if callable(r)) + TORCH_QPARAMS,
                         attributes=REFUSED_OPS + by_name, called=called, failed=failed,
                         case=case)


def _run(candidate: Callable, weight: torch.Tensor, case: str):
    got = call_on_a_copy(candidate, weight, QUANTIZERS,
                tr("quantize: your function called the package's quantizer, one of torch's "
                   "quantize or fake-quantize ops or torch.ao's observers: write it yourself."),
                tr("quantize: for {case} your function failed: {error}"), case)
    if not (isinstance(got, (tuple, list)) and len(got) == 2
            and all(isinstance(t, torch.Tensor) for t in got)):
        raise AssertionError(tr("quantize: for {case} your function returned {got}, not two "
                                "tensors (q, scale).", case=case, got=type(got).__name__))
    return got


def _compare(q: torch.Tensor, scale: torch.Tensor, weight: torch.Tensor, case: str) -> None:
    """Raise saying the first thing in which ``(q, scale)`` differs from the reference's."""
    want_q, want_scale = quantize.quantize_per_channel(weight)
    rows = weight.shape[0]
    if q.dtype != torch.int8:
        raise AssertionError(tr("quantize: for {case} q is {dtype}, not torch.int8 (one byte per "
                                "weight is what int8 stores).", case=case, dtype=q.dtype))
    if tuple(q.shape) != tuple(weight.shape):
        raise AssertionError(tr("quantize: for {case} q has shape {shape}, not the weight's "
                                "{want}.", case=case, shape=tuple(q.shape),
                                want=tuple(weight.shape)))
    if scale.numel() != rows or not scale.is_floating_point():
        raise AssertionError(tr("quantize: for {case} scale must hold one float per output row "
                                "({rows}); yours holds {n} of {dtype}.", case=case, rows=rows,
                                n=scale.numel(), dtype=scale.dtype))
    mine = scale.detach().reshape(rows).double()
    w = weight.detach().double()
    zero_rows = w.abs().amax(dim=1) == 0
    if rows > 1 and not zero_rows.any() and bool((mine == mine[0]).all()):
        raise AssertionError(tr("quantize: for {case} every row has the same scale: per-channel "
                                "quantization gives each output row its own.", case=case))
    for r in range(rows):
        if zero_rows[r]:
            if not (torch.isfinite(mine[r]) and mine[r] > 0):
                raise AssertionError(tr("quantize: for {case} the scale of row {row}, a row of "
                                        "zeros, is {value}: max|w| is 0 there, and 0 / 0 is nan, "
                                        "whose int8 value is undefined; give such a row a scale "
                                        "above 0.", case=case, row=r, value=float(mine[r])))
            if bool((q[r] != 0).any()):
                raise AssertionError(tr("quantize: for {case} row {row} is all zeros but its q "
                                        "is not.", case=case, row=r))
            continue
        if not torch.isclose(mine[r], want_scale[r].double(), rtol=1e-5, atol=0):
            forgot_abs = bool(w[r, w[r].abs().argmax()] < 0) and \
                bool(torch.isclose(mine[r].abs(), w[r].max().abs() / 127, rtol=1e-5))
            how = tr("too large") if mine[r] > want_scale[r] else tr("too small")
            hint = tr(" (its largest |w| is a negative weight)") if forgot_abs else ""
            raise AssertionError(tr("quantize: for {case} the scale of row {row}{hint} is {how}. "
                                    "A row's scale maps its largest |w| onto the largest int8 "
                                    "level.", case=case, row=r, hint=hint, how=how))
    if int(q.min()) < -127:
        raise AssertionError(tr("quantize: for {case} q uses -128: symmetric int8 keeps [-127, "
                                "127], so that both signs have the same range and 0 is exact.",
                                case=case))
    # entries within 1e-3 of a half step may round either way (the rounding of w / scale)
    ratio = w / want_scale.double()[:, None]
    tie = ((ratio - ratio.floor()) - 0.5).abs() < 1e-3
    differs = (q.long() != want_q.long()) & ~tie
    if bool(differs.any()):
        r = int(differs.any(dim=1).nonzero()[0])
        toward_zero = bool((q[r].long().abs() < want_q[r].long().abs())[differs[r]].all())
        hint = tr(" They all lie nearer 0: truncated, not rounded to the nearest level?") \
            if toward_zero else ""
        raise AssertionError(tr("quantize: for {case} the scales are right but {n} of row "
                                "{row}'s int8 values are not.{hint}", case=case,
                                n=int(differs[r].sum()), row=r, hint=hint))


def check_quantize(candidate: Callable) -> None:
    """Run ``candidate(weight) -> (q, scale)`` (int8 weights, one float scale per output row)
    against :func:`gpututor.compression.quantize.quantize_per_channel` on :func:`checker_weights`;
    say the first thing that differs (dtype, shape, a row's scale, range, rounding), not the
    answer."""
    if candidate is ...:
        say("quantize: not answered yet. Define your function and pass it in.")
        return
    for case, weight in checker_weights().items():
        q, scale = _run(candidate, weight, tr(case))
        _compare(q, scale, weight, tr(case))
    say("Correct: your int8 values and scales match the package's (scales within 10^-5, "
             "values equal but at half steps) on {count} weights (a row of zeros, negative "
             "extremes, rows 10^7 apart in size, a layer's Parameter).",
             count=len(checker_weights()))
