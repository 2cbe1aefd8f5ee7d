"""Lesson 07's exercise 1: the learner's ``my_changed(weight)``, per row how many weights get
another int8 code under torchao's rule (``max|w| / 127.5``, [-128, 127]) than under the
from-scratch one (``max|w| / 127``, [-127, 127]), run by :func:`check_torchao_changes` on weights
the learner does not choose, against :func:`changed_bounds`.

A code is ``round(w / scale)``, and the ways of computing it (float32 or float64, ``w / scale``
or ``w * (1 / scale)``, ...) agree except at a half step: torchao's rule puts a negative extreme
at -127.5, which float rounding sends to -128 or -127, row by row. The checker allows, for each
weight, the codes those ways give (:data:`RATIO_FORMS`), and counts on rows whose negative
extreme gets -128 every way, where a count that leaves the extreme out is wrong.

While the learner's function runs, what computes either rule refuses: the package's quantizers,
this module's own reference (:func:`torchao_rule_codes`, :func:`changed_bounds` and the helper
they share), torchao's functions, torch's quantize and fake-quantize ops and torch.ao's
observers' scale rule (:mod:`.exercises`).
"""
from __future__ import annotations

import random
from typing import Callable

import torch
import torch.nn as nn

from ...compression import quantize
from ...i18n import say, tr
from ..common.exercises import as_number
from .exercises import QUANTIZERS, call_on_a_copy


def torchao_rule_codes(w: torch.Tensor) -> torch.Tensor:
    """int8 codes of one row by torchao's symmetric int8 rule, computed as torchao computes them:
    ``scale = max|w| / 127.5`` (``choose_qparams_affine``, ``MappingType.SYMMETRIC``), codes
    ``round(w * (1 / scale))`` (``_quantize_affine_no_dtype_cast`` multiplies by the reciprocal),
    round half to even, clamp to [-128, 127]. The negative extreme lands at -127.5 give or take
    float rounding, so it gets -128 or -127 (the test checks against torchao's own codes)."""
    w = w.detach().float()
    scale = w.abs().max() / 127.5
    return torch.clamp(torch.round(w * (1.0 / scale)), -128, 127)


# the ways a learner may write w / scale, with scale = amax / levels: each is allowed, in float32
# and in float64 (torchao's own is the second, in float32)
RATIO_FORMS = (lambda w, amax, levels: w / (amax / levels),
               lambda w, amax, levels: w * (1 / (amax / levels)),
               lambda w, amax, levels: w * levels / amax,
               lambda w, amax, levels: w / amax * levels,
               lambda w, amax, levels: w * (levels / amax))


def _codes_every_way(w: torch.Tensor, amax: torch.Tensor, levels: float, low: int,
                     high: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The lowest and the highest code each entry of ``w`` gets by the rule ``round(w / scale)``,
    ``scale = amax / levels``, clamped to ``[low, high]``, over :data:`RATIO_FORMS` computed in
    float32 and in float64 (round half to even in each)."""
    codes = torch.stack([torch.round(form(w.to(dtype), amax.to(dtype), levels)).double()
                         for dtype in (torch.float32, torch.float64) for form in RATIO_FORMS])
    codes = codes.clamp(low, high)
    return codes.amin(dim=0), codes.amax(dim=0)


def changed_bounds(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of ``weight``, the fewest and the most entries whose int8 code differs between
    our rule (``max|w| / 127``, [-127, 127]) and torchao's (``max|w| / 127.5``, [-128, 127]):
    an entry counts for sure where the codes the ways of computing each rule give
    (:func:`_codes_every_way`) do not overlap, and may count where those ways disagree."""
    w = weight.detach().float()
    amax = w.abs().amax(dim=1, keepdim=True)
    ours_lo, ours_hi = _codes_every_way(w, amax, 127, -127, 127)
    theirs_lo, theirs_hi = _codes_every_way(w, amax, 127.5, -128, 127)
    must = (ours_hi < theirs_lo) | (theirs_hi < ours_lo)
    same = (ours_lo == ours_hi) & (theirs_lo == theirs_hi) & (ours_lo == theirs_lo)
    return must.sum(dim=1), (~same).sum(dim=1)


def _extremes_at_minus_128(gen: torch.Generator, rows: int, cols: int) -> torch.Tensor:
    """A ``rows x cols`` weight whose rows' extremes are negative and get torchao's code -128
    by every way of computing it: row sizes drawn until ``rows`` of them do (about a third do)."""
    sizes = torch.exp(torch.randn(16 * rows, 1, generator=gen) * 2)
    lowest, highest = _codes_every_way(-sizes, sizes, 127.5, -128, 127)
    sizes = sizes[(highest == -128).flatten()][:rows]
    assert len(sizes) == rows, "too few row sizes whose extreme gets -128 every way"
    weight = (torch.rand(rows, cols, generator=gen) * 2 - 1) * 0.95 * sizes
    weight[:, cols // 2] = -sizes.flatten()
    return weight


def changes_weights(teacher: nn.Module, seed: int | None = None) -> dict[str, torch.Tensor]:
    """The weights exercise 1's checker counts on (no row of zeros): four made here, one drawn
    afresh at each check (``seed``: a fixed one, for the tests), and the teacher's first
    attention weight, whose row 3 the lesson asks about."""
    gen = torch.Generator().manual_seed(11)
    plain = torch.randn(6, 10, generator=gen) * 0.05
    negative = torch.rand(5, 12, generator=gen) - 0.5                # entries in (-0.5, 0.5)
    negative[:, 3] = -0.6 - 0.3 * torch.rand(5, generator=gen)      # each row's extreme < 0
    sizes = torch.randn(4, 9, generator=gen) * torch.tensor([1e-3, 1.0, 40.0, 1e-4])[:, None]
    at_128 = _extremes_at_minus_128(gen, 6, 8)
    drawn = torch.Generator().manual_seed(random.randrange(2**31) if seed is None else seed)
    rows, cols = (int(n) for n in torch.randint(3, 12, (2,), generator=drawn))
    scales = torch.exp(torch.randn(rows, 1, generator=drawn) * 2)
    return {"a 6x10 weight": plain, "a 5x12 weight whose rows' extremes are negative": negative,
            "a 6x8 weight whose rows' negative extremes get -128 however it is computed": at_128,
            "a 4x9 weight whose rows differ in size by 10^5": sizes,
            "a weight drawn at this check": torch.randn(rows, cols + 4, generator=drawn) * scales,
            "the teacher's blocks[0].attn.qkv.weight": teacher.blocks[0].attn.qkv.weight}


def _torchao_refused() -> tuple[tuple, tuple]:
    """torchao's functions that compute its scales and codes, where torchao loads here: the
    plain one to refuse by its code, and its custom ops to refuse by name (where it is found)."""
    if quantize.torchao_version() is None:
        return (), ()
    from torchao.quantization import quant_primitives as primitives
    code = getattr(primitives, "_quantize_affine_no_dtype_cast", None)
    ops = getattr(torch.ops, "torchao", None)
    return ((code,) if callable(code) and not code.__code__.co_freevars else (),
            ((primitives, "_choose_qparams_affine"), (primitives, "_quantize_affine"),
             (ops, "choose_qparams_affine"), (ops, "quantize_affine")))


def _counts(got, rows: int) -> list[int] | None:
    """``got`` as one whole number per row (a list, tuple, array or tensor of ``rows``), or None."""
    if isinstance(got, torch.Tensor) or hasattr(got, "tolist"):
        got = torch.as_tensor(got).detach().flatten().tolist()
    if isinstance(got, (str, bytes)) or not hasattr(got, "__iter__"):
        return None
    counts = [as_number(n) for n in got]
    if len(counts) != rows or any(n is None or n != int(n) for n in counts):
        return None
    return [int(n) for n in counts]


def check_torchao_changes(candidate: Callable, teacher: nn.Module, row: int = 3) -> None:
    """Run ``candidate(weight)``, per row the number of weights whose int8 code differs between
    torchao's rule and ours, on :func:`changes_weights` against :func:`changed_bounds` (exact,
    but where the ways of computing a code disagree); every reference refuses while it runs.
    Then says what it counts in row ``row`` of the teacher's first attention weight."""
    if candidate is ...:
        say("torchao's codes: not answered yet. Define your function and pass it in.")
        return
    if not callable(candidate):
        raise AssertionError(tr("torchao's codes: pass your function my_changed itself, not "
                                "{got!r}.", got=candidate))
    torchao_code, torchao_ops = _torchao_refused()
    refused = QUANTIZERS + (torchao_rule_codes, changed_bounds, _codes_every_way,
                            quantize.quantize_torchao_int8,
                            quantize.quantize_dynamic_int8) + torchao_code
    weights = changes_weights(teacher)
    for name, weight in weights.items():
        case = tr(name)
        got = call_on_a_copy(
            candidate, weight, refused + torchao_ops,
            tr("torchao's codes: your function called one of the references (the package's "
               "quantizers, this checker's own count, torchao's functions, torch's quantize or "
               "fake-quantize ops, torch.ao's observers): write both rules yourself."),
            tr("torchao's codes: for {case} your function failed: {error}"), case)
        counts = _counts(got, weight.shape[0])
        if counts is None:
            raise AssertionError(tr("torchao's codes: for {case} your function returned {got}, "
                                    "not one whole count per row ({rows} rows).", case=case,
                                    got=type(got).__name__, rows=weight.shape[0]))
        fewest, most = changed_bounds(weight)
        for r, n in enumerate(counts):
            if not int(fewest[r]) <= n <= int(most[r]):
                how = tr("too many") if n > int(most[r]) else tr("too few")
                raise AssertionError(tr(
                    "torchao's codes: for {case} your count for row {row} is {how}. Check each "
                    "rule's scale (max|w| / 127 or / 127.5) and its range ([-127, 127] or [-128, "
                    "127]); what happens to the row's largest |w|, by its sign?", case=case,
                    row=r, how=how))
    say("Correct: your counts are the two rules' on {count} weights (negative extremes, some "
        "that get -128 however it is computed, rows 10^5 apart in size, one drawn at this "
        "check, the teacher's first attention weight). Row {row} of the teacher's "
        "blocks[0].attn.qkv.weight: your function counts {n} weights whose int8 code differs.",
        count=len(weights), row=row, n=counts[row])
