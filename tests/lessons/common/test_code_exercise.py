"""The shell every code exercise runs the learner's function in (``lessons.common.code_exercise``):
the reference refuses however it is reached, and each kind of failure becomes its sentence."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

import gpututor
from gpututor.lessons.common.code_exercise import CalledTheReference, call_refusing, number_from


def reference(x):
    return 2 * x


class Owner:
    """Stands for a module or an op namespace whose attribute refuses."""

    @staticmethod
    def op(x):
        return x + 1


CALLED = "you called the reference: write it yourself."


def test_the_learners_function_runs_and_read_converts_what_it_returned():
    assert call_refusing(lambda x, y: x + y, (2, 3), refused=(reference,), called=CALLED) == 5
    assert call_refusing(lambda: [1, 2], read=tuple, called=CALLED) == (1, 2)


def test_calling_the_reference_however_reached_is_said_and_it_works_again_after():
    held = reference                               # a reference held before the check
    for way in (lambda x: held(x), lambda x: reference(x), lambda x: Owner.op(x)):
        with pytest.raises(AssertionError, match="^you called the reference") as raised:
            call_refusing(way, (1,), refused=(reference,), attributes=((Owner, "op"),),
                          called=CALLED)
        assert raised.value.__suppress_context__    # the refusal's traceback is not shown
    assert reference(3) == 6 and Owner.op(3) == 4


def test_a_refusal_wrapped_in_the_learners_own_error_is_still_a_call_of_the_reference():
    def hides_it(x):
        try:
            return reference(x)
        except RuntimeError as exc:
            raise ValueError("something else") from exc
    with pytest.raises(AssertionError, match="^you called"):
        call_refusing(hides_it, (1,), refused=(reference,), called=CALLED,
                      mistyped="not a pair: {error}")


def test_read_runs_with_the_references_refused_too():
    def read(got):
        return reference(got)
    with pytest.raises(AssertionError, match="^you called"):
        call_refusing(lambda: 1, read=read, refused=(reference,), called=CALLED)


def test_in_a_rank_no_sentence_is_given_and_the_call_is_an_exception_to_record():
    with pytest.raises(CalledTheReference):
        call_refusing(reference, (1,), refused=(reference,))


def test_each_failure_gets_its_sentence_and_one_with_none_is_raised_as_is():
    def fails(kind):
        raise kind("boom")
    sentences = dict(called=CALLED, mistyped="case {case}: not a pair: {error}",
                     failed="case {case}: failed: {error}", case=7)
    with pytest.raises(AssertionError, match=r"^case 7: not a pair: boom$"):
        call_refusing(fails, (TypeError,), **sentences)
    with pytest.raises(AssertionError, match=r"^case 7: failed: KeyError: 'boom'$"):
        call_refusing(fails, (KeyError,), **sentences)
    with pytest.raises(AssertionError, match=r"^case 7 failed: ZeroDivisionError: boom$"):
        call_refusing(fails, (ZeroDivisionError,), called=CALLED,
                      failed="case {case} failed: {kind}: {error}", case=7)
    with pytest.raises(ZeroDivisionError):
        call_refusing(fails, (ZeroDivisionError,), called=CALLED)


def test_number_from_takes_any_real_number_and_says_when_it_is_not_one():
    for value in (3, 3.0, np.float32(3), torch.tensor(3.0)):
        assert number_from(value, "not a number") == 3.0
    for value in (True, "3", None, torch.ones(2)):
        with pytest.raises(AssertionError, match="^not a number$"):
            number_from(value, "not a number")


def test_only_the_shell_asks_whether_the_reference_was_called():
    """Every code exercise runs the learner's function through ``call_refusing``: no checker
    catches the refusal itself."""
    root = Path(gpututor.__file__).parent

    def names(path):
        return {getattr(node, "id", getattr(node, "attr", None))
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, (ast.Name, ast.Attribute))}
    callers = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                     if "called_the_reference" in names(path))
    assert callers == ["lessons/common/code_exercise.py"]
