"""The published solutions of the lessons' exercises, for the checkers' tests: each test runs
the code a learner reads in a lesson's Solutions cell (``tests/test_exercises.py`` finds it) and
expects its checker to accept it, and named wrong answers to be rejected."""
from __future__ import annotations

import functools

import nbformat
import pytest

from test_exercises import ROOT, exercises


@functools.lru_cache(maxsize=None)
def solutions(stem: str) -> dict[str, str]:
    """Answer variable -> the code of its Solutions item, for lesson ``stem``."""
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    return {c["variable"]: c["solution"] for c in exercises(nb)}


def published(stem: str, variable: str, **names):
    """The value lesson ``stem``'s Solutions cell gives ``variable``, its code run with ``names``
    standing for the notebook's modules and variables it uses."""
    scope = {"__name__": "__main__", **names}
    exec(solutions(stem)[variable], scope)
    return scope[variable]


def rejected(checker, answer, *args, match: str, **kwargs) -> None:
    """``checker(answer, ...)`` raises an AssertionError whose message matches ``match``."""
    with pytest.raises(AssertionError, match=match):
        checker(answer, *args, **kwargs)
