"""The package's validators: one home for "this value is wrong, here is what is allowed".

Every check raises ``ValueError`` worded the same way: the field, the value as given, and what
is allowed, e.g. ``precision='fp8' is invalid: allowed values are 'fp32', 'bf16', 'fp16'``.
Ground floor: imports nothing of gpututor, so the run's spec, the planner's formulas, the
strategies and the lessons all say it alike.
"""
from __future__ import annotations

import math


def choice(name: str, value, allowed) -> None:
    """``value`` must be one of ``allowed`` (a tuple, or a dict's keys)."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is invalid: allowed values are "
                         + ", ".join(repr(a) for a in allowed))


def integer(name: str, value, low: int = 1, high: int | None = None) -> None:
    """``value`` must be an int (not a bool) in ``[low, high]`` (no upper end if ``high`` is
    None); with the defaults, a positive integer."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low and \
        (high is None or value <= high)
    if not ok:
        if high is not None:
            allowed = f"an integer in [{low}, {high}]"
        else:
            allowed = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise ValueError(f"{name}={value!r} is invalid: allowed is {allowed}")


def is_number(value) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def positive(name: str, value, allow_zero: bool = False) -> None:
    """``value`` must be a finite number > 0 (>= 0 with ``allow_zero``)."""
    if not (is_number(value) and (value >= 0 if allow_zero else value > 0)):
        raise ValueError(f"{name}={value!r} is invalid: allowed is a finite number "
                         + (">= 0" if allow_zero else "> 0"))


def fraction(name: str, value, allow_zero: bool = False, allow_one: bool = True) -> None:
    """``value`` must be a number in (0, 1]; ``allow_zero`` closes the left end, ``allow_one``
    =False opens the right one."""
    low_ok = (lambda v: v >= 0) if allow_zero else (lambda v: v > 0)
    high_ok = (lambda v: v <= 1) if allow_one else (lambda v: v < 1)
    if not (is_number(value) and low_ok(value) and high_ok(value)):
        raise ValueError(f"{name}={value!r} is invalid: allowed is a fraction in "
                         + ("[0" if allow_zero else "(0") + ", " + ("1]" if allow_one else "1)"))


def number_where(name: str, value, ok, allowed: str) -> None:
    """``value`` must be a finite number for which ``ok(value)`` holds; ``allowed`` says which
    in words (e.g. ``"a number > 1"``)."""
    if not (is_number(value) and ok(value)):
        raise ValueError(f"{name}={value!r} is invalid: allowed is {allowed}")


def where(name: str, value, ok, allowed: str) -> None:
    """``ok(value)`` must hold (any type); ``allowed`` says what is allowed in words."""
    if not ok(value):
        raise ValueError(f"{name}={value!r} is invalid: allowed is {allowed}")
