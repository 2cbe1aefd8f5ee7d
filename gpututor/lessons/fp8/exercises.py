"""Lesson 06b's exercise checker: :func:`check_e4m3_cast` runs the learner's
``my_e4m3_cast(x, amax) -> (data, scale)``, per-tensor E4M3 scaling from a given amax (the
largest magnitude seen, as delayed scaling takes it from the last steps), on tensors it draws,
with the package's casts and torchao's refused while it runs.
"""
from __future__ import annotations

import random
import types
from typing import Callable

import torch

from ...optional import quiet_import
from ...i18n import say, tr
from ...precision import fp8_casts, fp8_linear
from ..common.code_exercise import call_refusing

SCALE_TOLERANCE = 1e-6    # relative, on the scale; the FP8 values must be exactly the cast's
E4M3_MAX = 448.0


def _refused() -> tuple:
    """The package's functions that cast or scale for the learner (their code swapped)."""
    return (fp8_casts.tensorwise_cast, fp8_casts.tensorwise_scale, fp8_casts.cast_with_scale,
            fp8_casts.saturating_cast, fp8_casts._amax_to_scale, fp8_casts.rowwise_cast,
            fp8_casts.rowwise_scale, fp8_casts.cast_counts, fp8_casts.DelayedScaler.scale,
            fp8_casts.DelayedScaler.cast, fp8_linear.cast_operand)


TORCHAO_NAMES = ("amax_to_scale", "tensor_to_scale", "to_fp8_saturated",
                 "hp_tensor_to_float8_dynamic", "hp_tensor_and_scale_to_float8")


def _refused_torchao() -> tuple:
    """torchao's scale and cast functions, by name in each of its float8 modules (they are
    wrapped, so refused as attributes, wherever torchao's own code looks them up)."""
    try:
        with quiet_import():   # torchao logs, on import, the GPU-only extensions it cannot load
            import torchao.float8 as package
            from torchao.float8 import float8_scaling_utils, float8_training_tensor, float8_utils
    except ImportError:      # torchao not installed: nothing of it to refuse
        return ()
    return tuple((module, name) for module in (package, float8_utils, float8_scaling_utils,
                                                float8_training_tensor) for name in TORCHAO_NAMES)


def e4m3_cast_saturates() -> bool:
    """Whether this torch build's cast to ``float8_e4m3fn`` saturates by itself (torch 2.12 on,
    eager: 1e4 and inf become 448); on older builds they become NaN, so only there does a cast
    without the clamp give values other than the clamped cast's."""
    got = torch.tensor([1e4, float("inf")]).to(torch.float8_e4m3fn).float()
    return bool((got == E4M3_MAX).all())


def _torchao_functions() -> tuple:
    """The plain functions under :func:`_refused_torchao`'s names (each decorator's
    ``__wrapped__`` followed to the end), whose code is swapped as :func:`_refused`'s is: a name
    the learner bound before the check refuses too."""
    found = []
    for module, name in _refused_torchao():
        f = getattr(module, name, None)
        while hasattr(f, "__wrapped__"):
            f = f.__wrapped__
        if isinstance(f, types.FunctionType) and not f.__code__.co_freevars and f not in found:
            found.append(f)
    return tuple(found)


def drawn_tensors(rng: random.Random) -> list[tuple[torch.Tensor, float, str]]:
    """``(x, amax, what)``: float32 tensors of drawn shapes whose magnitudes span 2^-24 to 2^6
    (some zeros, both signs), each with its own amax (dynamic), half of it (the tensor grew
    since the history: values overflow and must saturate) and eight times it (the history was
    larger: more values flush)."""
    cases = []
    for _ in range(3):
        gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
        rows, cols = rng.randint(3, 40), rng.randint(3, 64)
        exponents = torch.empty(rows, cols).uniform_(-24, 6, generator=gen)
        signs = torch.where(torch.rand(rows, cols, generator=gen) < 0.5, -1.0, 1.0)
        x = signs * torch.exp2(exponents)
        x[torch.rand(rows, cols, generator=gen) < 0.05] = 0.0
        amax = x.abs().max().item()
        cases += [(x, amax, "its own amax"), (x, amax / 2, "half its amax"),
                  (x, amax * 8, "eight times its amax")]
    return cases


def _read(got) -> tuple:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise TypeError("return two values: (data, scale)")
    data, scale = got
    if not isinstance(data, torch.Tensor):
        raise TypeError("data must be a tensor")
    scale = float(torch.as_tensor(scale).reshape(-1)[0]) if torch.as_tensor(scale).numel() == 1 \
        else None
    if scale is None:
        raise TypeError("scale must be one number (per-tensor scaling)")
    return data, scale


def check_e4m3_cast(candidate: Callable, rng: random.Random | None = None) -> None:
    """Run ``candidate(x, amax)`` on :func:`drawn_tensors` (nine cases drawn at each check): its
    scale within :data:`SCALE_TOLERANCE` (relative) of ``448 / amax``, and its FP8 values
    exactly those of ``x · scale`` (its own scale) clamped to ±448 and cast to
    ``float8_e4m3fn``, returned as that dtype or as their float values; :func:`_refused` and
    :func:`_refused_torchao` refuse while it runs."""
    if candidate is ...:
        say("my_e4m3_cast: not answered yet. Define your function and pass it in.")
        return
    cases = drawn_tensors(rng or random.Random())
    for x, amax, what in cases:
        data, scale = call_refusing(
            candidate, (x.clone(), amax), refused=_refused() + _torchao_functions(),
            attributes=_refused_torchao(),
            read=_read,
            called=tr("my_e4m3_cast: your function called a cast or scale the package or torchao "
                      "already has: write the scale and the cast yourself."),
            mistyped=tr("my_e4m3_cast: {error}"),
            failed=tr("my_e4m3_cast: on a {rows}x{cols} tensor with {what} your function "
                      "failed: {error}"), rows=x.shape[0], cols=x.shape[1], what=tr(what))
        want = E4M3_MAX / amax
        if abs(scale - want) > SCALE_TOLERANCE * want:
            inverted = abs(scale - amax / E4M3_MAX) <= 1e-3 * amax / E4M3_MAX
            hint = tr("Is it max / amax, not amax / max?") if inverted else \
                tr("Which format's largest value, and which amax, did you use?")
            raise AssertionError(tr("my_e4m3_cast: on a tensor with {what} your scale is {got:.6g}, "
                                    "not {want:.6g}. {hint}", what=tr(what), got=scale,
                                    want=want, hint=hint))
        expected = (x.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).float()
        got = data.float() if data.shape == x.shape else None
        if got is None:
            raise AssertionError(tr("my_e4m3_cast: data has shape {got}, x {want}.",
                                    got=tuple(data.shape), want=tuple(x.shape)))
        wrong = ~((got == expected) | (got.isnan() & expected.isnan()))
        if wrong.any():
            nan = bool(got[wrong].isnan().any())
            raise AssertionError(tr(
                "my_e4m3_cast: on a tensor with {what}, {n} of {total} values are not the E4M3 "
                "numbers of x x scale. {hint}", what=tr(what), n=int(wrong.sum()),
                total=x.numel(), hint=tr("Values beyond 448 became NaN: clamp to ±448 before "
                                         "the cast (saturation).") if nan else
                tr("Cast x x scale itself (in float32) to torch.float8_e4m3fn: no other "
                   "rounding, no division afterwards.")))
    say("Correct: your scale and cast give the E4M3 values of {n} drawn tensors exactly, with "
        "their own amax, with half of it (the overflowing values saturate at ±448) and with eight "
        "times it (more values flush to 0).", n=len(cases) // 3)
    if e4m3_cast_saturates():
        say("This torch build's cast to float8_e4m3fn saturates by itself, so here a cast without "
            "the clamp gives the same values and the clamp is not checked; on a build whose cast "
            "does not saturate, values beyond 448 become NaN without it.")
