"""Lesson 13's exercise checker: :func:`check_outer_step` runs the learner's DiLoCo outer step,
``my_outer_step(theta, workers, velocity, lr, momentum) -> (theta, velocity)``, on inputs the
checker draws (sizes, number of workers, learning rate, momentum, where each worker moved), for
three meetings in a row with the velocity the learner's own function returned, and compares the
shared weights after each meeting with the reference: the mean pseudo-gradient
Δ = mean over workers of (θ − θ_worker), stepped by SGD with Nesterov momentum, as
``parallel.data_parallel.local_sgd.DiLoCo`` does it [ref: douillard2023-diloco-algorithm]. While
the learner's function runs, the package's DiLoCo and torch's SGD update refuse.
"""
from __future__ import annotations

import random
from typing import Callable

import torch
import torch.optim.sgd as torch_sgd

from ...i18n import say, tr
from ...parallel.data_parallel.local_sgd import DiLoCo, LocalSGD
from ..common.code_exercise import call_refusing

# the comparison the lesson states: each value of the shared weights within a relative 1e-6 of
# the reference's (and 1e-9 absolute, for values near 0)
RTOL, ATOL = 1e-6, 1e-9
MEETINGS = 3
# what refuses while the learner's function runs: DiLoCo's meeting (the function under its
# no_grad wrapper), its average, and the updates torch's SGD.step calls (the public function
# and the three private ones it dispatches to, any of which a learner could call directly)
OUTER_STEP_REFUSED = (DiLoCo.meet.__wrapped__, LocalSGD.average, torch_sgd.sgd,
                      torch_sgd._single_tensor_sgd, torch_sgd._multi_tensor_sgd,
                      torch_sgd._fused_sgd)


def outer_step_reference(theta: torch.Tensor, workers: list[torch.Tensor],
                         velocity: torch.Tensor | None, lr: float, momentum: float):
    """One DiLoCo meeting on the shared weights ``theta``: the workers' mean pseudo-gradient
    stepped by torch's SGD (Nesterov where ``momentum`` > 0, as DiLoCo makes it); returns the
    new weights and SGD's momentum buffer (None before the first step)."""
    shared = torch.nn.Parameter(theta.detach().clone())
    outer = torch.optim.SGD([shared], lr=lr, momentum=momentum, nesterov=momentum > 0)
    if velocity is not None:
        outer.state[shared]["momentum_buffer"] = velocity.clone()
    shared.grad = torch.stack([theta - w for w in workers]).mean(dim=0)
    outer.step()
    return shared.detach(), outer.state[shared].get("momentum_buffer")


def outer_step_cases(rng: random.Random) -> list[dict]:
    """The drawn cases: a vector and a matrix of drawn sizes, 2 to 4 workers, a drawn learning
    rate and momentum; and one case with no momentum (plain SGD on the pseudo-gradient)."""
    cases = []
    for shape, momentum in (((rng.randint(5, 40),), rng.uniform(0.5, 0.95)),
                            ((rng.randint(2, 6), rng.randint(2, 6)), rng.uniform(0.5, 0.95)),
                            ((rng.randint(5, 20),), 0.0)):
        cases.append({"shape": shape, "workers": rng.randint(2, 4), "momentum": momentum,
                      "lr": rng.uniform(0.3, 1.0), "seed": rng.randrange(2**31)})
    return cases


def _as_pair(got) -> tuple:
    """The learner's (theta, velocity), as two values (a tuple or a list of two), each as a
    float64 tensor (a list or a numpy array is read as one): the velocity is fed back to the
    learner's function at the next meeting, so it goes back as a tensor, as the first did."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise TypeError(tr("return two values: (theta, velocity)"))
    theta = torch.as_tensor(got[0]).detach().to(torch.float64)
    velocity = torch.as_tensor(got[1]).detach().to(torch.float64)
    return theta, velocity


def check_outer_step(candidate: Callable) -> None:
    """Run ``candidate`` for :data:`MEETINGS` meetings on each drawn case (see the module
    docstring); the shared weights after every meeting must equal the reference's within
    :data:`RTOL` (relative) and :data:`ATOL` (absolute)."""
    if candidate is ...:
        say("my_outer_step: not answered yet. Define your function and pass it in.")
        return
    if not callable(candidate):
        raise AssertionError(tr("my_outer_step must be a function: def my_outer_step(theta, "
                                "workers, velocity, lr, momentum): ... return theta, velocity"))
    cases = outer_step_cases(random.Random())
    for number, case in enumerate(cases, 1):
        gen = torch.Generator().manual_seed(case["seed"])
        theta = torch.randn(case["shape"], generator=gen, dtype=torch.float64)
        mine, theirs = theta.clone(), theta.clone()
        my_velocity = torch.zeros_like(theta)
        their_velocity = None
        for meeting in range(1, MEETINGS + 1):
            # each worker moved from the shared weights by its own H inner steps
            workers = [theirs + 0.1 * torch.randn(case["shape"], generator=gen,
                                                  dtype=torch.float64)
                       for _ in range(case["workers"])]
            args = (mine.clone(), [w.clone() for w in workers], my_velocity, case["lr"],
                    case["momentum"])
            fields = dict(case=number, meeting=meeting, workers=case["workers"],
                          momentum=case["momentum"], lr=case["lr"])
            mine, my_velocity = call_refusing(
                candidate, args, refused=OUTER_STEP_REFUSED,
                read=_as_pair,
                called=tr("my_outer_step called the package's DiLoCo or torch's SGD step: write "
                          "the average and the Nesterov update yourself."),
                mistyped=tr("my_outer_step (case {case}, meeting {meeting}): {error}"),
                failed=tr("my_outer_step failed (case {case}, meeting {meeting}): {error}"),
                case=number, meeting=meeting)
            theirs, their_velocity = outer_step_reference(theirs, workers, their_velocity,
                                                          case["lr"], case["momentum"])
            if mine.shape != theirs.shape:
                raise AssertionError(tr("my_outer_step: theta has shape {got}, the shared "
                                        "weights {want}.", got=tuple(mine.shape),
                                        want=tuple(theirs.shape)))
            if not torch.allclose(mine, theirs, rtol=RTOL, atol=ATOL):
                worst = (mine - theirs).abs().max().item()
                raise AssertionError(_hint(number, meeting, case, worst, fields))
            mine = theirs.clone()   # the next meeting starts from the right weights
    say("Correct: your outer step gives DiLoCo's shared weights in {n} drawn cases ({rounds} "
        "meetings each, your own velocity carried from one to the next): the mean "
        "pseudo-gradient, stepped with Nesterov momentum.", n=len(cases), rounds=MEETINGS)


def _hint(number: int, meeting: int, case: dict, worst: float, fields: dict) -> str:
    """What a wrong value says: where it went wrong, and the question that leads to the fix."""
    head = tr("my_outer_step (case {case}: {workers} workers, lr {lr:.3f}, momentum "
              "{momentum:.3f}), meeting {meeting}: theta is off by up to {worst:.3g}.",
              worst=worst, **fields)
    if meeting > 1:
        why = tr("The first meeting was right: is the velocity you return the one the next "
                 "meeting needs (momentum times the old velocity, plus Δ)?")
    elif case["momentum"] == 0:
        why = tr("With no momentum the step is theta − lr·Δ: is Δ the mean over the workers "
                 "of theta − worker (not worker − theta, not the sum)?")
    else:
        why = tr("Is Δ the mean over the workers of theta − worker, and is the step Nesterov's "
                 "(theta − lr·(Δ + momentum·velocity), velocity already updated), not plain "
                 "momentum's?")
    return head + " " + why
