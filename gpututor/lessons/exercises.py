"""The lessons' exercise checkers (lessons 03, 04, 05 and 11 have their own modules:
``sharding_exercises.py``, ``tensor_parallel_exercises.py``, ``pipeline_exercises.py``,
``moe_exercises.py``). Each accepts the published solution and rejects a plausible wrong answer
(``tests/test_exercises.py`` runs both); ``...`` means "not answered yet".

Checkers that need real ranks (:func:`check_allreduce`, here) send the
learner's function to the ranks inside a small task object, by value (cloudpickle), so a
function defined in a notebook cell works. They run on CPU ranks (gloo) whatever the machine
has: their tensors are CPU tensors.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from ..config import RunSpec
from ..i18n import tr
from ..runtime.launcher import RunFailed, launch
from .guards import OnlyPointToPoint


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


# ---- lesson 02: a ring all-reduce, run in real ranks ------------------------------------------

@dataclass(frozen=True)
class AllReduceCheck:
    """In every rank: the candidate and ``dist.all_reduce`` on the same tensors, compared. While
    the candidate runs, every built-in collective refuses (:class:`OnlyPointToPoint`): the
    exercise is to build it from point-to-point messages. The sizes are at least one element
    per rank and not all multiples of the world size, so ``torch.chunk`` and
    ``torch.tensor_split`` solutions both work and uneven pieces are tried."""

    candidate: Callable

    def __call__(self, spec, rank, world, device, emit):
        for step, numel in enumerate((world, world * 3 + 1, 1000)):
            gen = torch.Generator().manual_seed(1000 * rank + step)
            x = torch.randn(numel, generator=gen)
            expected = x.clone()
            dist.all_reduce(expected)
            given = x.clone()
            with OnlyPointToPoint() as guard:
                try:
                    got = self.candidate(given, rank, world)
                except RuntimeError:
                    if not guard.used:
                        raise
                    got = None
            if guard.used:
                emit({"step": step, "numel": numel, "max_error": float("inf"),
                      "built_in": guard.used[0]})
                return   # the other ranks stop too: they would wait for this one
            error = float((got - expected).abs().max()) if isinstance(got, torch.Tensor) and \
                got.shape == expected.shape else float("inf")
            in_place = float((given - expected).abs().max()) <= 1e-4
            emit({"step": step, "numel": numel, "max_error": error, "in_place": in_place})


def check_allreduce(candidate, world_sizes: tuple = (3, 4)) -> None:
    """Run ``candidate(tensor, rank, world)`` in real ranks against ``dist.all_reduce``, on 3
    and on 4 ranks (on 2 ranks the left and the right neighbour are the same rank, so a ring
    that sends the wrong way would pass). Prints what matched; raises ``AssertionError``
    saying what did not, or that it called a built-in collective."""
    if candidate is Ellipsis:
        print("not answered yet: define your function and pass it in")
        return
    for world_size in world_sizes:
        spec = RunSpec(world_size=world_size, device="cpu", timeout=20)
        try:
            records = launch(spec, task=AllReduceCheck(candidate)).wait()
        except RunFailed as failure:   # e.g. a rank waited for a message never sent
            raise AssertionError(f"on {world_size} ranks your function failed: "
                                 + str(failure).splitlines()[0]) from None
        built_in = [r["built_in"] for r in records if "built_in" in r]
        if built_in:
            raise AssertionError(f"your function called the built-in collective {built_in[0]}: "
                                 "build the sum from dist.isend / dist.recv only")
        worst = max(records, key=lambda r: r["max_error"])
        if worst["max_error"] <= 1e-4 and not all(r["in_place"] for r in records):
            raise AssertionError("your function returned the sum but left the tensor it was given "
                                 "unchanged: sum into that tensor, in place")
        if worst["max_error"] > 1e-4:
            raise AssertionError(f"on {world_size} ranks, rank {worst['rank']}: a tensor of "
                                 f"{worst['numel']} elements differs from dist.all_reduce by "
                                 f"{worst['max_error']:.3g}")
    print(f"Correct: equals dist.all_reduce on {' and '.join(map(str, world_sizes))} ranks, "
          "from point-to-point messages only")




def online_softmax_attention(update, scores: torch.Tensor, values: torch.Tensor,
                             block: int) -> torch.Tensor:
    """``softmax(scores) @ values`` computed FlashAttention's way with the learner's ``update``:
    the key blocks in turn, from ``m = -inf``, ``l = 0``, ``acc = 0``."""
    rows = scores.shape[0]
    m = torch.full((rows,), float("-inf"), dtype=scores.dtype)
    l = torch.zeros(rows, dtype=scores.dtype)
    acc = torch.zeros(rows, values.shape[1], dtype=scores.dtype)
    for k0 in range(0, scores.shape[1], block):
        m, l, acc = update(m, l, acc, scores[:, k0:k0 + block], values[k0:k0 + block])
    return acc / l[:, None]


def check_online_softmax(update) -> None:
    """Your ``update(m, l, acc, s, v) -> (m, l, acc)`` against ``softmax(S) @ V`` computed whole,
    with key blocks of several sizes and scores whose maximum rises from block to block."""
    if update is ...:
        print(tr("Not answered yet: define my_update and run the cell again."))
        return
    gen = torch.Generator().manual_seed(7)
    scores = torch.randn(5, 23, generator=gen, dtype=torch.float64) * 3
    scores += torch.linspace(0, 12, 23, dtype=torch.float64)    # later keys score higher
    values = torch.randn(23, 4, generator=gen, dtype=torch.float64)
    expected = torch.softmax(scores, dim=-1) @ values
    for block in (23, 8, 5, 1):
        try:
            got = online_softmax_attention(update, scores, values, block)
        except Exception as error:
            raise AssertionError(f"your update failed with key blocks of {block}: "
                                 f"{type(error).__name__}: {error}") from None
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or \
                not torch.allclose(got, expected, rtol=1e-9, atol=1e-12):
            raise AssertionError(f"with key blocks of {block}, acc / l is not softmax(S) @ V "
                                 "(did you rescale l and acc by exp(m_old - m_new) when the "
                                 "maximum rose?). Try again.")
    print("Correct: the same as softmax(S) @ V whole, for key blocks of 23, 8, 5 and 1")
