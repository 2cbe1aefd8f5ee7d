"""What the lessons' exercise checkers share (each lesson's checkers are in its own
``exercises.py``): :func:`as_number`, :func:`check_answer` for a number, and
:func:`records_in_ranks` for a code exercise run in real ranks (the learner's function itself
runs in :func:`.code_exercise.call_refusing`). Each checker accepts the published solution and
rejects plausible wrong answers (``tests/lessons/``); ``...`` means "not answered yet".
"""
from __future__ import annotations

import math
import numbers

import torch

from ... import checks
from ...i18n import say, tr
from ...runtime.launcher import RunFailed, launch


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


# what the messages say the expected value is: read off a run, computed from a run's numbers,
# given by a formula, or counted on a model
SOURCES = {
    "measured": ("{what}: {answer} is not what this notebook measured. Try again.",
                 "Correct. {what}: {number} (measured: {expected})"),
    "derived": ("{what}: {answer} is not what this run's measurements give. Try again.",
                "Correct. {what}: {number} (from this run's measurements: {expected})"),
    "formula": ("{what}: {answer} is not what the formula gives. Try again.",
                "Correct. {what}: {number} (the formula gives {expected})"),
    "counted": ("{what}: {answer} is not what counting on the model gives. Try again.",
                "Correct. {what}: {number} (counted on the model: {expected})"),
}


def check_answer(answer, expected: float | None, what: str, rel_tol: float = 0.02,
                 source: str = "measured") -> None:
    """A number the learner read off this notebook's own run (within ``rel_tol``), or, with
    ``source`` "derived", "formula" or "counted", one computed from the run's measurements, a
    formula gives, or counted on a model: the messages say which (:data:`SOURCES`)."""
    checks.choice("source", source, tuple(SOURCES))
    if answer is ...:
        say("{what}: not answered yet. Replace ... with your answer and run the cell again.",
                 what=tr(what))
        return
    if expected is None:
        raise AssertionError(tr("{what}: this notebook has not measured it yet (did every cell "
                                "above run and finish?): nothing to compare your answer with.",
                                what=tr(what)))
    number = as_number(answer)
    wrong, right = SOURCES[source]
    if number is None or not within(number, expected, rel_tol):
        raise AssertionError(tr(wrong, what=tr(what), answer=repr(answer)))
    say(right, what=tr(what), number=f"{number:,.4g}", expected=f"{expected:,.4g}")




def records_in_ranks(task, spec, failed: str) -> list[dict]:
    """The records ``task`` emits in ``spec``'s real ranks. A rank that fails (raised, or waited
    for a message never sent) becomes the learner's ``AssertionError``: ``failed``, a template
    with ``{world}`` and ``{error}`` (the failure's first line), in the notebook's language."""
    try:
        return launch(spec, task=task).wait()
    except RunFailed as failure:
        raise AssertionError(tr(failed, world=spec.world_size,
                                error=str(failure).splitlines()[0])) from None


def within(number: float, expected: float, rel_tol: float) -> bool:
    """``number`` within ``rel_tol`` of ``expected``, relative to the expected value (the
    tolerance a lesson states; ``math.isclose`` takes it relative to the larger of the two, so
    an answer above would pass a little further off)."""
    return abs(number - expected) <= rel_tol * abs(expected)
