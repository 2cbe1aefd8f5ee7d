"""Lesson 11's exercise checkers: each takes the learner's answer and the lesson's own objects
(the run's spec, its records) and derives what it expects from them, so the notebook shows only
the call. ``...`` means "not answered yet".

- :func:`check_capacity`: the learner's ``my_capacity(tokens, top_k, n_expert,
  capacity_factor)``, the slots each expert may take, run against
  :func:`gpututor.moe.expert_capacity` on cases the checker picks and draws (``expert_capacity``
  refuses while it runs).
- :func:`check_dropped_share`: the share of layer 0's routed slots a run dropped over all its
  steps (measured, from its records; a run that dropped nothing is not a question).
- :func:`check_balancing_loss`: the learner's Switch load-balancing loss, run against
  :func:`gpututor.moe.load_balancing_loss` on router outputs the learner does not choose, value
  and gradient.
"""
from __future__ import annotations

import random
from typing import Callable

import torch

from ...i18n import say, tr
from ...moe import expert_capacity, load_balancing_loss, route
from ..common.code_exercise import call_refusing, number_from
from ..common.exercises import check_answer


# (tokens, top_k, n_expert, capacity_factor): exercise 1's cases. The first is a run of
# base.replace(batch_size=24, capacity_factor=1.5); in the others the quotient is not a whole
# number (floor, round and ceil differ), top-1 and top-2, factors below and above 1
CAPACITY_CASES = ((24 * 64, 2, 4, 1.5), (10, 2, 4, 1.25), (3, 1, 2, 1.0), (100, 1, 8, 1.0),
                  (1000, 2, 6, 1.25), (1030, 2, 4, 0.75))
DRAWN_FACTORS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)   # exact in binary: no rounding at the ceiling


def drawn_capacity_cases(count: int = 3, rng: random.Random | None = None) -> list[tuple]:
    """``count`` more cases drawn afresh at each check, each with a quotient that is not a whole
    number: a table of answers made beforehand for :data:`CAPACITY_CASES` does not cover them."""
    rng = rng or random.Random()
    cases = []
    while len(cases) < count:
        case = (rng.randint(5, 5000), rng.choice((1, 2)), rng.randint(2, 16),
                rng.choice(DRAWN_FACTORS))
        tokens, top_k, n_expert, factor = case
        if (factor * tokens * top_k / n_expert) % 1:
            cases.append(case)
    return cases


def check_capacity(candidate: Callable) -> None:
    """Run ``candidate(tokens, top_k, n_expert, capacity_factor)`` on :data:`CAPACITY_CASES`
    and three cases drawn at random (:func:`drawn_capacity_cases`): the slots each expert may
    take, exactly :func:`~gpututor.moe.expert_capacity`'s
    ``ceil(capacity_factor · tokens · top_k / n_expert)``, which refuses while it runs."""
    if candidate is ...:
        say("capacity: not answered yet. Define your function and pass it in.")
        return
    if not callable(candidate):
        raise AssertionError(tr("capacity: pass your function my_capacity itself, not {got!r}.",
                                got=candidate))
    cases = list(CAPACITY_CASES) + drawn_capacity_cases()
    for tokens, top_k, n_expert, factor in cases:
        expected = expert_capacity(tokens, top_k, n_expert, factor)
        where = tr("{tokens} tokens, top-{top_k}, {n_expert} experts, capacity factor {factor}",
                   tokens=tokens, top_k=top_k, n_expert=n_expert, factor=factor)
        got = call_refusing(candidate, (tokens, top_k, n_expert, factor),
                            refused=(expert_capacity,),
                            called=tr("capacity: your function called gpututor.moe."
                                      "expert_capacity: write the formula yourself."),
                            failed=tr("capacity [{where}]: your function failed: {error}"),
                            where=where)
        number = number_from(got, tr("capacity: for {where} your function returned {got!r} (a "
                                     "{kind}), not a number.", where=where, got=got,
                                     kind=type(got).__name__))
        if number != expected:
            raise AssertionError(tr(
                "capacity: for {where} yours gives {got:,g}, not the slots each expert may take. "
                "How many slots do the tokens send in all, what share of them is one expert's, "
                "and which way does a share that is not a whole number round?",
                where=where, got=number))
    say("Correct: your function gives each expert's slots exactly in {cases} cases: top-1 and "
        "top-2, capacity factors below and above 1, shares that are not whole numbers.",
        cases=len(cases))


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
