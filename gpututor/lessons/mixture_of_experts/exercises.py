"""Lesson 11's exercise checkers: each takes the learner's answer and the lesson's own objects
(the run's spec, its records) and derives what it expects from them, so the notebook shows only
the call. ``...`` means "not answered yet".

- :func:`check_capacity`: the slots each expert may take in the spec's runs (a formula of the
  spec: its batch, sequence, experts, top-k and capacity factor).
- :func:`check_dropped_share`: the share of layer 0's routed slots a run dropped over all its
  steps (measured, from its records; a run that dropped nothing is not a question).
- :func:`check_balancing_loss`: the learner's Switch load-balancing loss, run against
  :func:`gpututor.moe.load_balancing_loss` on router outputs the learner does not choose, value
  and gradient.
"""
from __future__ import annotations

from typing import Callable

import torch

from ...i18n import say, tr
from ...moe import expert_capacity, load_balancing_loss, route
from ..common.code_exercise import call_refusing
from ..common.exercises import check_answer


def check_capacity(answer, spec) -> None:
    """Slots per expert, per layer and step, for a run of ``spec`` (a MoE spec): the formula
    ``ceil(capacity_factor · tokens · top_k / n_expert)`` with the spec's own numbers."""
    cfg = spec.model_config
    expected = expert_capacity(spec.batch_size * spec.seq_len, cfg.top_k, cfg.n_expert,
                               cfg.capacity_factor)
    check_answer(answer, expected, "slots per expert", rel_tol=0, source="formula")


def check_dropped_share(answer, records: list[dict], layer: int = 0) -> None:
    """The share of ``layer``'s routed slots (kept + dropped) that the run of ``records`` (rank
    0's) dropped, summed over all its steps."""
    if answer is not ... and not records:
        raise AssertionError(tr("dropped share: there are no records yet (did section 3's run "
                                "finish?): nothing to compare your answer with."))
    dropped = sum(sum(r["expert_dropped"][layer]) for r in records)
    routed = dropped + sum(sum(r["expert_tokens"][layer]) for r in records)
    if answer is not ... and dropped == 0:
        raise AssertionError(tr("dropped share: this run dropped no slot of layer {layer}, so "
                                "any 0 would pass; run section 3 again with a smaller "
                                "capacity_factor (e.g. 0.8) and answer for that run.",
                                layer=layer))
    check_answer(answer, dropped / routed if routed else None, "dropped share of layer 0",
                 rel_tol=1e-6)


def _router_outputs(seed: int, tokens: int, n_expert: int, top_k: int):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(tokens, n_expert, generator=gen) * 2   # uneven loads
    probs, _, experts = route(logits, top_k)
    return probs.detach().requires_grad_(), experts


def check_balancing_loss(candidate: Callable) -> None:
    """Run ``candidate(probs, experts)`` (router probabilities, tokens x n_expert; each token's
    chosen experts, tokens x top_k) against the reference ``n_expert · Σ_e f_e · P_e`` on three
    routings it does not choose; both the value and the gradient that reaches ``probs`` (through
    ``P_e`` only: ``f_e`` counts choices and has none) must match."""
    if candidate is ...:
        say("balancing loss: not answered yet. Define your function and pass it in.")
        return
    for seed, (tokens, n_expert, top_k) in enumerate(((12, 4, 2), (40, 8, 2), (33, 6, 1))):
        probs, experts = _router_outputs(seed, tokens, n_expert, top_k)
        fraction = torch.bincount(experts.flatten(), minlength=n_expert).float() / experts.numel()
        expected = load_balancing_loss(probs, fraction)
        (want,) = torch.autograd.grad(expected, probs)
        mine = probs.detach().clone().requires_grad_()
        got = call_refusing(candidate, (mine, experts), refused=(load_balancing_loss,),
                            called=tr("balancing loss: your function called "
                                      "gpututor.moe.load_balancing_loss: write the loss "
                                      "yourself."))
        shape = f"{tokens} tokens, {n_expert} experts, top-{top_k}"
        if not isinstance(got, torch.Tensor) or got.numel() != 1:
            raise AssertionError(tr("balancing loss: for {shape} your function returned {got!r}, "
                                    "not a one-number tensor.", shape=shape, got=got))
        value = got.detach().reshape(()).to(expected.dtype)   # a float64 answer is fine too
        if not torch.allclose(value, expected.detach(), rtol=1e-5, atol=1e-7):
            raise AssertionError(tr("balancing loss: for {shape} your loss is {got:.6g}, not the "
                                    "reference's value. Check what f_e and P_e average over, and "
                                    "the factor in front.", shape=shape, got=float(got.detach().sum())))
        grad = torch.autograd.grad(got.reshape(()), mine, allow_unused=True)[0] \
            if got.requires_grad else None
        if grad is None or not torch.allclose(grad.to(want.dtype), want, rtol=1e-5, atol=1e-7):
            raise AssertionError(tr("balancing loss: for {shape} the value is right but its "
                                    "gradient to the router probabilities is not: the loss "
                                    "must reach the router through P_e (f_e only counts "
                                    "choices).", shape=shape))
    say("Correct: your balancing loss equals gpututor.moe.load_balancing_loss, value and "
             "gradient, on three routings.")
