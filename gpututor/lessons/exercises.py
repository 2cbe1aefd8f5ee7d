"""The lessons' exercise checkers (lesson 01b's are in ``one_device_exercises.py``, 02's in
``data_parallel_exercises.py``, 11's in ``moe_exercises.py``). Each accepts the
published solution and rejects a plausible wrong answer (``tests/test_exercises.py`` runs
both); ``...`` means "not answered yet".

Checkers that need real ranks (:func:`check_row_parallel`) send the
learner's function to the ranks inside a small task object, by value (cloudpickle), so a
function defined in a notebook cell works. They run on CPU ranks (gloo) whatever the machine
has: their tensors are CPU tensors.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Iterable

import torch
import torch.nn as nn

from ..config import RunSpec
from ..i18n import tr
from ..parallel.tensor_parallel.megatron import TensorParallelGroup, owned_indices
from ..plan.memory import model_state_bytes
from ..runtime.launcher import launch


def as_number(value) -> float | None:
    """``value`` as a float if it is a real number (int, float, a numpy number, a 0-d tensor),
    else None. True and False are not numbers here."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex() \
            and value.dtype != torch.bool:
        return float(value.item())
    item = getattr(value, "item", None)          # numpy scalars and 0-d arrays
    if callable(item) and getattr(value, "size", 0) == 1:
        return as_number(item())
    return None


def check_answer(answer, expected: float | None, what: str, rel_tol: float = 0.02,
                 source: str = "measured") -> None:
    """A number the learner read off this notebook's own run (within ``rel_tol``), or, with
    ``source="formula"``, one a formula gives: the messages say which."""
    if answer is ...:
        print(tr("{what}: not answered yet. Replace ... with your answer and run the cell again.",
                 what=tr(what)))
        return
    if expected is None:
        raise AssertionError(tr("{what}: this notebook has not measured it yet (did every cell "
                                "above run and finish?): nothing to compare your answer with.",
                                what=tr(what)))
    number = as_number(answer)
    if number is None or not math.isclose(number, expected, rel_tol=rel_tol):
        wrong = ("{what}: {answer} is not what this notebook measured. Try again."
                 if source == "measured" else
                 "{what}: {answer} is not what the formula gives. Try again.")
        raise AssertionError(tr(wrong, what=tr(what), answer=repr(answer)))
    right = "Correct. {what}: {number} (measured: {expected})" if source == "measured" \
        else "Correct. {what}: {number} (the formula gives {expected})"
    print(tr(right, what=tr(what), number=f"{number:,.4g}", expected=f"{expected:,.4g}"))


# ---- lesson 03: which ZeRO stage first fits ----------------------------------------------------

def first_stage_that_fits(n_params: float, world_size: int, device_bytes: float,
                          convention: str = "mixed-adam", other_bytes: float = 0.0):
    """The lowest ZeRO stage (0 = data parallel) whose model state plus ``other_bytes`` (e.g.
    activations) fits in ``device_bytes`` per rank, by the formula; None if none fits."""
    for stage in range(4):
        state = model_state_bytes(n_params, zero_stage=stage, dp=world_size,
                                  convention=convention)["total"]
        if state + other_bytes <= device_bytes:
            return stage
    return None


def check_fits(answer, n_params: float, world_size: int, device_bytes: float,
               convention: str = "mixed-adam", other_bytes: float = 0.0) -> None:
    """Exercise feedback for "which stage first fits?" (by the formula; ``...`` = no answer)."""
    expected = first_stage_that_fits(n_params, world_size, device_bytes, convention, other_bytes)
    if answer is ...:
        print("Not answered yet. Replace ... with a stage (0-3, or None) and run the cell again.")
        return
    if answer != expected or isinstance(answer, bool):
        raise AssertionError(f"stage {answer!r} is not the first that fits. Try again.")
    per_rank = model_state_bytes(n_params, zero_stage=expected, dp=world_size,
                                 convention=convention)["total"] if expected is not None else None
    print(f"Correct: stage {expected}" + (f" needs {per_rank / 1e9:.1f} GB of model state per "
                                          "rank (formula)" if per_rank else ""))


# ---- lesson 04: a row-parallel linear layer, run in real ranks --------------------------------

@dataclass(frozen=True)
class RowParallelCheck:
    """In every rank: the candidate's output and gradients against one dense ``nn.Linear``."""

    candidate: Callable

    def __call__(self, spec, rank, world, device, emit):
        tp = TensorParallelGroup(rank, world)
        torch.manual_seed(0)                       # the same layer, input and upstream gradient
        dense = nn.Linear(4 * world, 6)
        x = torch.randn(3, 5, 4 * world, requires_grad=True)
        upstream = torch.randn(3, 5, 6)
        dense(x).backward(upstream)
        cols = owned_indices(dense.in_features, tp)
        x_local = x.detach()[..., cols].clone().requires_grad_()
        weight = dense.weight.detach()[:, cols].clone().requires_grad_()
        out = self.candidate(x_local, weight, dense.bias.detach(), tp)
        errors = {"output": float((out - dense(x)).abs().max())}
        out.backward(upstream)
        for name, got, want in (("input gradient", x_local.grad, x.grad[..., cols]),
                                ("weight gradient", weight.grad, dense.weight.grad[:, cols])):
            errors[name] = float((got - want).abs().max()) if got is not None else float("inf")
        emit({"step": 0, **errors})


def check_row_parallel(candidate, world_size: int = 2) -> None:
    """Run ``candidate(x_local, weight_local, bias, tp)`` in ``world_size`` real ranks and compare
    its output and gradients with one dense ``nn.Linear``. Raises ``AssertionError`` if wrong."""
    if candidate is Ellipsis:
        print("not answered yet: define your function and pass it in")
        return
    spec = RunSpec(world_size=world_size, device="cpu", timeout=20)
    records = launch(spec, task=RowParallelCheck(candidate)).wait()
    for record in records:
        for what in ("output", "input gradient", "weight gradient"):
            if not record[what] <= 1e-5:
                raise AssertionError(f"rank {record['rank']}: the {what} differs from the dense "
                                     f"layer's by {record[what]:.3g}")
    print(f"Correct: on {world_size} ranks the output and the input and weight gradients equal "
          "one dense nn.Linear")


# ---- lesson 09: groups of a rank grid ---------------------------------------------------------

def check_group(answer, grid, rank: int, dim: str) -> None:
    """"Which ranks form ``rank``'s group along ``dim`` in ``grid``?" (a list of ranks, any
    order; ``...`` = no answer). ``grid`` is a :class:`gpututor.parallel.mesh.RankGrid`."""
    if answer is ...:
        print("Not answered yet. Replace ... with a list of ranks and run the cell again.")
        return
    expected = grid.group_of(rank, dim)
    try:
        given = sorted(int(r) for r in answer)
    except (TypeError, ValueError):
        raise AssertionError(f"{answer!r} is not a list of ranks. Try again.") from None
    if given != sorted(expected) or isinstance(answer, (str, bytes)):
        raise AssertionError(f"{answer!r} is not rank {rank}'s {dim} group in this grid. "
                             "Try again: which ranks differ from it only in the "
                             f"{dim} index?")
    print(f"Correct: rank {rank}'s {dim} group is {expected}")


def check_names(answer, expected, what: str) -> None:
    """A set of names (e.g. the layouts that fit): any order, no extras, none missing."""
    if answer is ...:
        print(tr("{what}: not answered yet. Replace ... with a list of names and run the cell "
                 "again.", what=tr(what)))
        return
    if isinstance(answer, str) or not all(isinstance(a, str) for a in answer):
        raise AssertionError(tr("{what}: {answer} is not a list of names. Try again.",
                                what=tr(what), answer=repr(answer)))
    given, wanted = set(answer), set(expected)
    if given != wanted:
        raise AssertionError(tr("{what}: {given} is not it ({right} of yours are right, {missing} "
                                "missing). Try again.", what=tr(what), given=repr(sorted(given)),
                                right=len(given & wanted), missing=len(wanted - given)))
    print(tr("Correct. {what}: {names}", what=tr(what), names=sorted(wanted)))


# ---- lesson 06: a loss scaler's update rule ----------------------------------------------------

def scale_trajectory(update_rule, gradients: Iterable[float], init_scale: float = 2.0**10,
                     growth_interval: int = 3) -> list[float]:
    """The loss scale in force at each step of ``gradients`` and after the last, with the update
    rule written as ``update_rule(scale, clean_steps, found_inf, growth_interval) -> (scale,
    clean_steps)``."""
    scale, clean_steps, scales = init_scale, 0, [init_scale]
    for g in gradients:
        scale, clean_steps = update_rule(scale, clean_steps, not math.isfinite(g), growth_interval)
        scales.append(scale)
    return scales


def check_loss_scaler(update_rule, gradients: list[float], init_scale: float = 2.0**10,
                      growth_interval: int = 3) -> None:
    """Your update rule against ``torch.amp.GradScaler`` on the same stream, step by step (not
    only where it ends: a rule that grows one step late can end at the same scale)."""
    if update_rule is ...:
        print(tr("Not answered yet: define my_update and run the cell again."))
        return
    from ..precision.loss_scaling import replay_scalers
    rows = replay_scalers(list(gradients) + [1.0], init_scale=init_scale,
                          growth_interval=growth_interval)
    expected = [row["grad_scaler_scale"] for row in rows]
    got = scale_trajectory(update_rule, gradients, init_scale, growth_interval)
    for step, (mine, theirs) in enumerate(zip(got, expected)):
        if as_number(mine) != theirs:
            raise AssertionError(f"at step {step} your rule's scale is {mine!r}, GradScaler's "
                                 f"{theirs:g}. Try again.")
    print(f"Correct: the same scale as GradScaler at every one of {len(expected)} steps "
          f"(ending at {expected[-1]:g})")
