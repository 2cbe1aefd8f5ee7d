"""The shell every code exercise's checker runs the learner's function in: :func:`call_refusing`
calls it once with the package's own version refusing (:mod:`.guards`), and turns a call of
that version, or a failure, into the sentence the learner reads; :func:`number_from` reads a
number off what it returned. A checker then only compares.

A checker that runs in real ranks cannot raise the learner's sentence there (the rank would
just fail): it leaves the sentences out, catches :class:`CalledTheReference`, and emits a record
that the checker's own process turns into the sentence.
"""
from __future__ import annotations

from typing import Callable

from .exercises import as_number
from .guards import RefusedAttributes, RefusedWhileRunning, called_the_reference


class CalledTheReference(Exception):
    """The learner's function called one of the references refused while it ran (raised by
    :func:`call_refusing` where no ``called`` sentence is given: inside a rank)."""


def call_refusing(candidate: Callable, args: tuple = (), *, refused: tuple = (),
                  attributes: tuple = (), read: Callable | None = None, called: str | None = None,
                  mistyped: str | None = None, failed: str | None = None, **fields):
    """``candidate(*args)``, passed through ``read`` (a conversion of what it returned), while
    the functions ``refused`` and the ``(owner, name)`` ``attributes`` refuse. The sentences
    come translated (``tr(template)``), and say, as an ``AssertionError``:

    - ``called``: that it called one of them (without it: :class:`CalledTheReference`);
    - ``mistyped``: that it or ``read`` raised a ``TypeError`` or ``ValueError``, ``{error}``;
    - ``failed``: that it raised anything else, ``{error}`` (``Kind: message``, or the message
      alone where the sentence shows ``{kind}`` itself).

    ``fields`` fill the sentences' other placeholders. An error with no sentence is raised as is.
    """
    try:
        with RefusedWhileRunning(*refused), RefusedAttributes(*attributes):
            got = candidate(*args)
            return got if read is None else read(got)
    except Exception as exc:   # noqa: BLE001 - said to the learner
        # the one place that asks: the refusal may come wrapped in the learner's own error
        if called_the_reference(exc):
            if called is None:
                raise CalledTheReference() from None
            raise AssertionError(called) from None
        if mistyped is not None and isinstance(exc, (TypeError, ValueError)):
            raise AssertionError(mistyped.format(error=exc, **fields)) from None
        if failed is not None:
            kind = type(exc).__name__
            error = exc if "{kind}" in failed else f"{kind}: {exc}"
            raise AssertionError(failed.format(kind=kind, error=error, **fields)) from None
        raise


def number_from(got, not_a_number: str) -> float:
    """``got`` as a float (:func:`~.exercises.as_number`); if it is not a number, an
    ``AssertionError`` saying ``not_a_number`` (translated and filled in)."""
    number = as_number(got)
    if number is None:
        raise AssertionError(not_a_number)
    return number
