"""Guards for exercises that ask the learner to build something the package already has: while
the learner's function runs, the package's own version refuses, however it is reached.

:class:`RefusedWhileRunning` swaps the code of the given functions for one that raises, so a name
imported before the check, an attribute of the module, or a reference held anywhere all reach
the refusal (``lessons/exercises.py``'s ``OnlyPointToPoint`` does the same for collectives).
"""
from __future__ import annotations

REFUSED = "gpututor_reference_called"


def _refuse(*args, **kwargs):
    # this code runs as the refused function's, with that function's module globals: a literal
    raise RuntimeError("gpututor_reference_called")


class RefusedWhileRunning:
    """``with RefusedWhileRunning(f, g): candidate()``: inside, calling ``f`` or ``g`` raises
    ``RuntimeError(REFUSED)``; afterwards they work again."""

    def __init__(self, *functions):
        self.functions, self.saved = functions, []

    def __enter__(self):
        self.saved = [f.__code__ for f in self.functions]
        for f in self.functions:
            f.__code__ = _refuse.__code__
        return self

    def __exit__(self, *exc):
        for f, code in zip(self.functions, self.saved):
            f.__code__ = code
        return False


def called_the_reference(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is a refused call of a reference."""
    while exc is not None:
        if isinstance(exc, RuntimeError) and REFUSED in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
